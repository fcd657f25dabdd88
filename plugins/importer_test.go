package plugins

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	shaMain    = "1111111111111111111111111111111111111111"
	shaFeature = "2222222222222222222222222222222222222222"
	shaV2      = "3333333333333333333333333333333333333333"
)

// fakeGitHub is a loopback TLS server laid out like GitHub's API (under
// /api) and raw content (under /raw), plus plain URLs for URL imports.
type fakeGitHub struct {
	srv  *httptest.Server
	mu   sync.Mutex
	main string // the commit main points at; tests move it
	hits []string
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	t.Helper()
	example, err := os.ReadFile("testdata/python-data-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	minimal, _ := os.ReadFile("testdata/minimal.json")
	v2 := strings.Replace(string(example), `"1.0.0"`, `"2.0.0"`, 1)
	g := &fakeGitHub{main: shaMain}
	mux := http.NewServeMux()
	jsonBody := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, body)
	}
	mux.HandleFunc("GET /api/repos/alice/tools", func(w http.ResponseWriter, r *http.Request) {
		jsonBody(w, `{"full_name":"alice/tools","default_branch":"main"}`)
	})
	mux.HandleFunc("GET /api/repos/alice/tools/commits/{ref...}", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		main := g.main
		g.mu.Unlock()
		sha := map[string]string{"main": main, "feature/x": shaFeature, shaMain: shaMain}[r.PathValue("ref")]
		if sha == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			jsonBody(w, `{"message":"No commit found for SHA"}`)
			return
		}
		jsonBody(w, `{"sha":"`+sha+`"}`)
	})
	mux.HandleFunc("GET /api/repos/alice/limited", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	})
	raw := map[string]string{
		"/raw/alice/tools/" + shaMain + "/plugin.json":                   string(example),
		"/raw/alice/tools/" + shaV2 + "/plugin.json":                     v2,
		"/raw/alice/tools/" + shaFeature + "/plugins/hello/plugin.json":  string(minimal),
		"/raw/alice/tools/" + shaFeature + "/plugins/hello/variant.json": string(minimal),
	}
	mux.HandleFunc("GET /raw/", func(w http.ResponseWriter, r *http.Request) {
		body, ok := raw[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8") // as raw content is served
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("GET /p.json", func(w http.ResponseWriter, r *http.Request) { jsonBody(w, string(example)) })
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>")
	})
	mux.HandleFunc("GET /image", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Content-Type", "image/png") })
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, strings.Repeat(" ", 2000))
	})
	mux.HandleFunc("GET /bigchunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i < 20; i++ {
			fmt.Fprint(w, strings.Repeat(" ", 100))
			w.(http.Flusher).Flush() // no Content-Length: the cap must hold while reading
		}
	})
	mux.HandleFunc("GET /redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			http.Redirect(w, r, "/p.json", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("GET /broken.json", func(w http.ResponseWriter, r *http.Request) { jsonBody(w, `{"name":"x","description":"y","colour":1}`) })
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.hits = append(g.hits, r.URL.Path)
		g.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitHub) importer() *Importer {
	return &Importer{Client: g.srv.Client(), GitHubAPI: g.srv.URL + "/api", GitHubRaw: g.srv.URL + "/raw/"}
}

func TestImportGitHubForms(t *testing.T) {
	g := newFakeGitHub(t)
	im := g.importer()
	for _, tt := range []struct {
		source, id, commit, resolved string
	}{
		{"github.com/alice/tools", "python-data-tools", shaMain, "/raw/alice/tools/" + shaMain + "/plugin.json"},
		{"https://github.com/alice/tools.git", "python-data-tools", shaMain, "/raw/alice/tools/" + shaMain + "/plugin.json"},
		{"https://www.github.com/alice/tools/tree/main", "python-data-tools", shaMain, "/raw/alice/tools/" + shaMain + "/plugin.json"},
		{"github.com/alice/tools/tree/feature/x/plugins/hello", "hello", shaFeature, "/raw/alice/tools/" + shaFeature + "/plugins/hello/plugin.json"},
		{"https://github.com/alice/tools/blob/feature/x/plugins/hello/variant.json", "hello", shaFeature, "/raw/alice/tools/" + shaFeature + "/plugins/hello/variant.json"},
		{"github.com/alice/tools/blob/" + shaMain + "/plugin.json", "python-data-tools", shaMain, "/raw/alice/tools/" + shaMain + "/plugin.json"},
	} {
		t.Run(tt.source, func(t *testing.T) {
			p, o, err := im.Import(context.Background(), tt.source)
			if err != nil {
				t.Fatal(err)
			}
			if p.ID() != tt.id || o.Kind != OriginGitHub || o.Commit != tt.commit || o.Location != tt.source || o.Resolved != g.srv.URL+tt.resolved {
				t.Fatalf("got %s %+v", p.ID(), o)
			}
		})
	}
}

func TestImportRefusals(t *testing.T) {
	g := newFakeGitHub(t)
	im := g.importer()
	im.MaxBytes = 1500
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	tls := g.srv.URL
	dir := t.TempDir()
	mux := http.NewServeMux()
	toPlain := httptest.NewTLSServer(mux)
	defer toPlain.Close()
	mux.Handle("/", http.RedirectHandler(plain.URL+"/p.json", http.StatusFound))
	im2 := *im
	im2.Client = toPlain.Client()
	for _, tt := range []struct {
		name, source, text string
		im                 *Importer
	}{
		{"plain http", "http://example.test/p.json", "use the https:// address", im},
		{"ftp", "ftp://example.test/p.json", "unsupported scheme", im},
		{"missing file", filepath.Join(dir, "nope.json"), "no such file", im},
		{"folder", dir, "is a folder", im},
		{"html", tls + "/page", "is a web page", im},
		{"image", tls + "/image", `content type "image/png"`, im},
		{"too big", tls + "/big", "over the 1500-byte cap", im},
		{"too big chunked", tls + "/bigchunked", "over the 1500-byte cap", im},
		{"too many redirects", tls + "/redirect/9", "more than 5 redirects", im},
		{"redirect to http", toPlain.URL + "/x", "not https", &im2},
		{"404", tls + "/nothing.json", "404 Not Found", im},
		{"invalid recipe", tls + "/broken.json", "colour: unknown field", im},
		{"github form", "github.com/alice", "want github.com/OWNER/REPO", im},
		{"github dotdot", "github.com/alice/tools/tree/main/../x", "path segment", im},
		{"github blob not json", "github.com/alice/tools/blob/main/README.md", "must name the plugin's .json file", im},
		{"github unknown ref", "github.com/alice/tools/tree/nope/x", "no branch, tag or commit", im},
		{"github no plugin.json", "github.com/alice/tools/tree/feature/x", "has no plugin.json at feature/x", im},
		{"github unknown repo", "github.com/bob/none", "no such public repository", im},
		{"github rate limit", "github.com/alice/limited", "rate limit", im},
		{"github owner", "github.com/al!ce/tools", "not a GitHub owner", im},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := tt.im.Import(context.Background(), tt.source)
			if err == nil || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v, want %q", err, tt.text)
			}
			if !errors.Is(err, ErrImport) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v wraps neither sentinel", err)
			}
		})
	}
	// Redirects within the cap are followed.
	if _, o, err := im.Import(context.Background(), tls+"/redirect/3"); err != nil || o.Resolved != tls+"/p.json" {
		t.Fatalf("%v %+v", err, o)
	}
}

func TestImportFileAndReimport(t *testing.T) {
	ctx := context.Background()
	g := newFakeGitHub(t)
	im := g.importer()
	lib, _ := OpenLibrary(t.TempDir())

	// From a file.
	file := filepath.Join(t.TempDir(), "hello.json")
	b, _ := os.ReadFile("testdata/minimal.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p, o, err := im.Import(ctx, file)
	if err != nil || o.Kind != OriginFile || o.Location != file {
		t.Fatal(err, o)
	}
	if _, _, err := lib.Save(ctx, p, o); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), "Says hello", "Says hello twice", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	e, changed, err := im.Reimport(ctx, lib, "hello", nil)
	if err != nil || !changed || e.Current().Number != 2 || e.Current().Recipe.Description != "Says hello twice" {
		t.Fatalf("file reimport: %v %v", err, changed)
	}

	// From GitHub: the branch moves, re-import records the new commit.
	p, o, err = im.Import(ctx, "github.com/alice/tools")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lib.Save(ctx, p, o); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := im.Reimport(ctx, lib, "python-data-tools", nil); err != nil || changed {
		t.Fatalf("unchanged reimport: %v %v", err, changed)
	}
	g.mu.Lock()
	g.main = shaV2
	g.mu.Unlock()
	e, changed, err = im.Reimport(ctx, lib, "python-data-tools", nil)
	if err != nil || !changed {
		t.Fatal(err)
	}
	if cur := e.Current(); cur.Number != 2 || cur.Origin.Commit != shaV2 || cur.Recipe.Version != "2.0.0" || e.Versions[0].Origin.Commit != shaMain {
		t.Fatalf("github reimport: %+v", e)
	}

	// A duplicate has nowhere to be fetched from.
	if _, err := lib.Duplicate(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := im.Reimport(ctx, lib, "hello-copy", nil); !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), "duplicated from hello") {
		t.Fatal(err)
	}
}
