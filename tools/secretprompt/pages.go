package secretprompt

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/tools"
)

// MaxValueBytes bounds a value typed into a page.
const MaxValueBytes = tools.MaxSecretBytes

// Pages serves one-time pages on loopback where the user types a secret.
// Each page's path is a random 256-bit token (the only way to reach it),
// answers one successful POST, carries a CSRF token, and expires with the
// call that opened it. The server starts with the first page.
type Pages struct {
	Store Store
	// Addr defaults to 127.0.0.1:0 (a free port).
	Addr string

	mu    sync.Mutex
	ln    net.Listener
	srv   *http.Server
	host  string // 127.0.0.1:PORT, the only Host header answered
	pages map[string]*page
}

type page struct {
	req     tools.SecretRequest
	csrf    string
	expires time.Time
	done    chan error // buffered 1: the page's single answer
}

// Page is one open page.
type Page struct {
	URL  string
	Done <-chan error // nil when stored, ErrSecretDenied when declined
	id   string
	p    *Pages
}

// Close withdraws the page; later visits get "expired".
func (pg *Page) Close() {
	pg.p.mu.Lock()
	delete(pg.p.pages, pg.id)
	pg.p.mu.Unlock()
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open adds a page for req that lives at most ttl.
func (p *Pages) Open(req tools.SecretRequest, ttl time.Duration) (*Page, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		addr := p.Addr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("serving the secret page on %s: %w", addr, err)
		}
		p.ln, p.host = ln, ln.Addr().String()
		p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
		p.pages = map[string]*page{}
		go p.srv.Serve(ln)
	}
	id := randomToken()
	pg := &page{req: req, csrf: randomToken(), expires: time.Now().Add(ttl), done: make(chan error, 1)}
	p.pages[id] = pg
	return &Page{URL: "http://" + p.host + "/secret/" + id, Done: pg.done, id: id, p: p}, nil
}

// Close stops the server.
func (p *Pages) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	p.srv, p.pages = nil, nil
	return err
}

// lookup returns the live page of id.
func (p *Pages) lookup(id string) *page {
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := p.pages[id]
	if pg == nil || time.Now().After(pg.expires) {
		return nil
	}
	return pg
}

// take removes the page of id if it is still pg: the first answer wins.
func (p *Pages) take(id string, pg *page) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pages[id] != pg {
		return false
	}
	delete(p.pages, id)
	return true
}

func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Another name for this address (DNS rebinding) is not this site.
	if r.Host != p.host {
		http.Error(w, "wrong host: open the link exactly as given", http.StatusMisdirectedRequest)
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/secret/")
	pg := (*page)(nil)
	if ok && id != "" && !strings.Contains(id, "/") {
		pg = p.lookup(id)
	}
	if pg == nil {
		p.render(w, http.StatusNotFound, view{Gone: true})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p.render(w, http.StatusOK, view{Req: pg.req, CSRF: pg.csrf})
	case http.MethodPost:
		p.post(w, r, id, pg)
	default:
		h.Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (p *Pages) post(w http.ResponseWriter, r *http.Request, id string, pg *page) {
	// A form posted from another site: refused by its origin, and it
	// could not know the CSRF token anyway.
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+p.host {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		http.Error(w, "send the form (application/x-www-form-urlencoded)", http.StatusUnsupportedMediaType)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 2*MaxValueBytes)
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			http.Error(w, fmt.Sprintf("the value is too long: at most %d bytes", MaxValueBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(pg.csrf)) != 1 {
		http.Error(w, "the form is stale or forged: reload the page", http.StatusForbidden)
		return
	}
	if r.PostForm.Get("action") == "deny" {
		if p.take(id, pg) {
			pg.done <- fmt.Errorf("%w (on the secret page)", tools.ErrSecretDenied)
		}
		p.render(w, http.StatusOK, view{Req: pg.req, Denied: true})
		return
	}
	v := r.PostForm.Get("value")
	switch {
	case v == "":
		p.render(w, http.StatusBadRequest, view{Req: pg.req, CSRF: pg.csrf, Problem: "Type the value, or choose Deny."})
		return
	case len(v) > MaxValueBytes:
		p.render(w, http.StatusRequestEntityTooLarge, view{Req: pg.req, CSRF: pg.csrf, Problem: fmt.Sprintf("The value is too long: at most %d bytes.", MaxValueBytes)})
		return
	}
	if !p.take(id, pg) {
		p.render(w, http.StatusNotFound, view{Gone: true})
		return
	}
	err := p.Store.Set(pg.req.Agent.Slug, pg.req.Key, v)
	pg.done <- err
	if err != nil {
		p.render(w, http.StatusInternalServerError, view{Req: pg.req, Problem: "Storing it failed: " + err.Error()})
		return
	}
	p.render(w, http.StatusOK, view{Req: pg.req, Stored: true})
}

type view struct {
	Req                  tools.SecretRequest
	CSRF, Problem        string
	Gone, Stored, Denied bool
}

func (p *Pages) render(w http.ResponseWriter, code int, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	pageTmpl.Execute(w, v)
}

// The description is the model's text: html/template escapes it, and it is
// labelled as coming from the agent.
var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Osaurus Sandbox: secret</title>
<style>body{font-family:system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em}
input[type=password]{width:100%;padding:.4em;font-size:1em}button{margin:.8em .6em 0 0;padding:.4em 1.2em}
.note{color:#555}.problem{color:#b00}</style></head><body>
{{if .Gone}}<h1>This link has expired</h1><p>It was already used, or the agent stopped waiting. You can set the secret with <code>osaurus-sandbox secret set AGENT KEY</code>.</p>
{{else if .Stored}}<h1>Stored</h1><p>{{.Req.Key}} is in the OS keychain for agent {{.Req.Agent.Name}}. You can close this tab.</p>
{{else if .Denied}}<h1>Declined</h1><p>The agent {{.Req.Agent.Name}} is told you declined. You can close this tab.</p>
{{else}}<h1>Secret for agent {{.Req.Agent.Name}}</h1>
<p>The agent asks for <strong>{{.Req.Key}}</strong>. The value goes into your OS keychain; the agent's commands can use it, but the model never sees it.</p>
{{with .Req.Description}}<p class="note">The agent says: “{{.}}”</p>{{end}}
{{with .Problem}}<p class="problem">{{.}}</p>{{end}}
<form method="post" autocomplete="off"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label>Value of {{.Req.Key}}<br><input type="password" name="value" autofocus></label><br>
<button type="submit" name="action" value="save">Save</button><button type="submit" name="action" value="deny" formnovalidate>Deny</button>
</form>{{end}}
</body></html>
`))
