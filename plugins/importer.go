package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Defaults for the githubApiUrl and githubRawUrl settings.
const (
	DefaultGitHubAPI = "https://api.github.com"
	DefaultGitHubRaw = "https://raw.githubusercontent.com"
)

// ErrImport is wrapped by every failure to fetch a recipe.
var ErrImport = agentproto.Class(agentproto.ErrUpstream, "import failed")

// Importer fetches recipes from a file, an https URL or GitHub.
type Importer struct {
	// Client makes the requests; nil means a client with a 60 s timeout.
	// Tests pass their TLS test server's client.
	Client *http.Client
	// GitHubAPI and GitHubRaw are the API and raw-content base URLs
	// (settings githubApiUrl, githubRawUrl); empty means GitHub's.
	GitHubAPI, GitHubRaw string
	// MaxBytes caps a download; 0 means MaxRecipeBytes.
	MaxBytes int64
	// MaxRedirects bounds redirects per request; 0 means 5.
	MaxRedirects int
}

// Fetched is a recipe's bytes and where they came from.
type Fetched struct {
	Data   []byte
	Origin Origin
}

const sourceHelp = "give a file path, an https:// URL of a plugin JSON file, or github.com/OWNER/REPO (optionally /tree/REF/PATH or /blob/REF/PATH/plugin.json)"

func importErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrImport, fmt.Sprintf(format, args...))
}

// Fetch reads source without decoding it.
func (im *Importer) Fetch(ctx context.Context, source string) (*Fetched, error) {
	source = strings.TrimSpace(source)
	if source == "" {
		return nil, importErr("no source; %s", sourceHelp)
	}
	lower := strings.ToLower(source)
	for _, prefix := range []string{"https://", "http://", ""} {
		for _, host := range []string{"github.com/", "www.github.com/"} {
			if strings.HasPrefix(lower, prefix+host) {
				return im.fetchGitHub(ctx, source, source[len(prefix)+len(host):])
			}
		}
	}
	switch {
	case strings.HasPrefix(lower, "https://"):
		data, final, err := im.get(ctx, source, true)
		if err != nil {
			return nil, err
		}
		return &Fetched{Data: data, Origin: Origin{Kind: OriginURL, Location: source, Resolved: final}}, nil
	case strings.HasPrefix(lower, "http://"):
		return nil, importErr("%s: plain http could be altered on the way; use the https:// address", source)
	case strings.Contains(lower, "://") && !strings.HasPrefix(lower, "file://"):
		return nil, importErr("%s: unsupported scheme; %s", source, sourceHelp)
	}
	name := strings.TrimPrefix(source, "file://")
	// The origin records where the file is, wherever `update` runs from.
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, importErr("%s: no such file; %s", name, sourceHelp)
	}
	if err != nil {
		return nil, importErr("%v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, importErr("%s is a folder; give the plugin's JSON file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, im.maxBytes()+1))
	if err != nil {
		return nil, importErr("%s: %v", name, err)
	}
	if int64(len(data)) > im.maxBytes() {
		return nil, importErr("%s is larger than %d bytes; a plugin recipe is a small JSON file", name, im.maxBytes())
	}
	return &Fetched{Data: data, Origin: Origin{Kind: OriginFile, Location: name}}, nil
}

// Import fetches, decodes and validates source.
func (im *Importer) Import(ctx context.Context, source string) (*Plugin, Origin, error) {
	f, err := im.Fetch(ctx, source)
	if err != nil {
		return nil, Origin{}, err
	}
	p, err := DecodeBytes(f.Data)
	if err != nil {
		return nil, f.Origin, fmt.Errorf("%s: %w", f.Origin.Location, err)
	}
	if err := p.Validate(); err != nil {
		return nil, f.Origin, fmt.Errorf("%s: %w", f.Origin.Location, err)
	}
	return p, f.Origin, nil
}

// Reimport fetches a library plugin again from where its current version
// came from and saves the result as a new version. accept, when set, sees
// the fetched recipe first and can refuse it (the CLI's allowlist warning).
func (im *Importer) Reimport(ctx context.Context, lib *Library, id string, accept func(*Plugin) error) (*Entry, bool, error) {
	p, no, err := im.Refetch(ctx, lib, id, accept)
	if err != nil {
		return nil, false, err
	}
	return lib.Save(ctx, p, no)
}

// Refetch is Reimport without the save: the recipe fetched again and its
// origin, for a process that has the library's owner save it.
func (im *Importer) Refetch(ctx context.Context, lib *Library, id string, accept func(*Plugin) error) (*Plugin, Origin, error) {
	e, err := lib.Get(id)
	if err != nil {
		return nil, Origin{}, err
	}
	o := e.Current().Origin
	switch o.Kind {
	case OriginFile, OriginURL, OriginGitHub:
	default:
		return nil, Origin{}, importErr("%q was %s, not imported; there is nothing to fetch it from again", id, describeOrigin(o))
	}
	p, no, err := im.Import(ctx, o.Location)
	if err != nil {
		return nil, Origin{}, err
	}
	if p.ID() != id {
		return nil, Origin{}, importErr("%s now holds the plugin %q, not %q; import it as a new plugin with `plugin import`", o.Location, p.ID(), id)
	}
	if accept != nil {
		if err := accept(p); err != nil {
			return nil, Origin{}, err
		}
	}
	return p, no, nil
}

func describeOrigin(o Origin) string {
	switch o.Kind {
	case OriginEditor:
		return "written in the editor"
	case OriginDuplicate:
		return "duplicated from " + o.Location
	case OriginAgent:
		return "created by the agent " + o.Agent
	}
	return o.Kind
}

func (im *Importer) maxBytes() int64 {
	if im.MaxBytes > 0 {
		return im.MaxBytes
	}
	return MaxRecipeBytes
}

func (im *Importer) client() *http.Client {
	var c http.Client
	if im.Client != nil {
		c = *im.Client
	} else {
		c.Timeout = 60 * time.Second
	}
	max := im.MaxRedirects
	if max <= 0 {
		max = 5
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > max {
			return fmt.Errorf("more than %d redirects", max)
		}
		if req.URL.Scheme != "https" {
			return fmt.Errorf("redirected to %s, which is not https", req.URL.Redacted())
		}
		return nil
	}
	return &c
}

// get downloads u (https only), capped, following bounded redirects. With
// recipe set, only a JSON or plain-text body is accepted, so a web page
// pasted by mistake gets a helpful error instead of a JSON syntax one.
func (im *Importer) get(ctx context.Context, u string, recipe bool) ([]byte, string, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "https" || pu.Host == "" {
		return nil, "", importErr("%s: not an https:// URL", u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", importErr("%s: %v", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := im.client().Do(req)
	if err != nil {
		return nil, "", importErr("%v", err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL.String()
	if resp.StatusCode != http.StatusOK {
		return nil, final, &httpStatusError{url: final, code: resp.StatusCode}
	}
	if recipe {
		ct := resp.Header.Get("Content-Type")
		mt, _, _ := mime.ParseMediaType(ct)
		switch {
		case ct == "", mt == "application/json", mt == "text/plain", mt == "application/octet-stream", strings.HasSuffix(mt, "+json"):
		case mt == "text/html":
			return nil, final, importErr("%s is a web page, not a plugin JSON file; link the raw file (or give the github.com/... address)", final)
		default:
			return nil, final, importErr("%s has the content type %q; a plugin is a JSON file", final, ct)
		}
	}
	if resp.ContentLength > im.maxBytes() {
		return nil, final, importErr("%s is %d bytes, over the %d-byte cap for a plugin", final, resp.ContentLength, im.maxBytes())
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, im.maxBytes()+1))
	if err != nil {
		return nil, final, importErr("%s: %v", final, err)
	}
	if int64(len(data)) > im.maxBytes() {
		return nil, final, importErr("%s is over the %d-byte cap for a plugin", final, im.maxBytes())
	}
	return data, final, nil
}

type httpStatusError struct {
	url  string
	code int
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("%s: %s: %d %s", ErrImport, e.url, e.code, http.StatusText(e.code))
}
func (e *httpStatusError) Unwrap() error { return ErrImport }

var ghNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// fetchGitHub handles github.com/OWNER/REPO[/tree/REF/PATH | /blob/REF/PATH].
// The ref is resolved to a commit through the API, and the file is read
// from raw content at that commit, so the recorded commit is exactly what
// was imported even if the branch moves meanwhile.
func (im *Importer) fetchGitHub(ctx context.Context, source, rest string) (*Fetched, error) {
	u, _ := url.Parse("https://github.com/" + rest)
	rest = strings.Trim(u.Path, "/")
	segs := strings.Split(rest, "/")
	form := "github.com/OWNER/REPO, github.com/OWNER/REPO/tree/REF/PATH or github.com/OWNER/REPO/blob/REF/PATH/plugin.json"
	if len(segs) < 2 || segs[0] == "" || segs[1] == "" {
		return nil, importErr("%s: want %s", source, form)
	}
	owner, repo := segs[0], strings.TrimSuffix(segs[1], ".git")
	for _, n := range []string{owner, repo} {
		if !ghNameRe.MatchString(n) || n == "." || n == ".." {
			return nil, importErr("%s: %q is not a GitHub owner or repository name", source, n)
		}
	}
	for _, s := range segs[2:] {
		if s == "" || s == "." || s == ".." {
			return nil, importErr("%s: empty, . or .. path segment; want %s", source, form)
		}
	}
	var (
		refAndPath []string
		blob       bool
	)
	switch {
	case len(segs) == 2:
	case len(segs) >= 4 && segs[2] == "tree":
		refAndPath = segs[3:]
	case len(segs) >= 5 && segs[2] == "blob":
		refAndPath, blob = segs[3:], true
		if !strings.HasSuffix(strings.ToLower(segs[len(segs)-1]), ".json") {
			return nil, importErr("%s: a blob address must name the plugin's .json file", source)
		}
	default:
		return nil, importErr("%s: want %s", source, form)
	}
	api := strings.TrimRight(orDefault(im.GitHubAPI, DefaultGitHubAPI), "/")
	raw := strings.TrimRight(orDefault(im.GitHubRaw, DefaultGitHubRaw), "/")
	repoAPI := api + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo)

	var ref, sha string
	var filePath []string
	if refAndPath == nil {
		var info struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := im.getJSON(ctx, repoAPI, &info); err != nil {
			return nil, ghErr(source, err)
		}
		if info.DefaultBranch == "" {
			return nil, importErr("%s: GitHub gave no default branch for %s/%s", source, owner, repo)
		}
		ref = info.DefaultBranch
		c, err := im.commit(ctx, repoAPI, ref)
		if err != nil {
			return nil, ghErr(source, err)
		}
		sha = c
		filePath = []string{"plugin.json"}
	} else {
		// A branch name may hold slashes, so "tree/a/b/c" may be ref a
		// with path b/c or ref a/b with path c; GitHub itself tries the
		// shortest ref first, and so do we.
		last := len(refAndPath)
		if blob {
			last-- // the file name is never part of the ref
		}
		for i := 1; i <= last && i <= 10; i++ {
			c, err := im.commit(ctx, repoAPI, strings.Join(refAndPath[:i], "/"))
			var se *httpStatusError
			if errors.As(err, &se) && (se.code == http.StatusNotFound || se.code == http.StatusUnprocessableEntity) {
				continue
			}
			if err != nil {
				return nil, ghErr(source, err)
			}
			ref, sha, filePath = strings.Join(refAndPath[:i], "/"), c, refAndPath[i:]
			break
		}
		if sha == "" {
			return nil, importErr("%s: no branch, tag or commit of %s/%s matches the address", source, owner, repo)
		}
		if !blob {
			filePath = append(filePath, "plugin.json")
		}
	}
	esc := make([]string, len(filePath))
	for i, s := range filePath {
		esc[i] = url.PathEscape(s)
	}
	rawURL := raw + "/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/" + sha + "/" + strings.Join(esc, "/")
	data, final, err := im.get(ctx, rawURL, true)
	var se *httpStatusError
	if errors.As(err, &se) && se.code == http.StatusNotFound {
		return nil, importErr("%s: %s/%s has no %s at %s (%s); point at the folder holding plugin.json with /tree/%s/PATH",
			source, owner, repo, path.Join(filePath...), ref, sha[:min(12, len(sha))], ref)
	}
	if err != nil {
		return nil, err
	}
	return &Fetched{Data: data, Origin: Origin{Kind: OriginGitHub, Location: source, Resolved: final, Commit: sha}}, nil
}

var shaRe = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// commit resolves ref to a commit id through the API.
func (im *Importer) commit(ctx context.Context, repoAPI, ref string) (string, error) {
	segs := strings.Split(ref, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	var c struct {
		SHA string `json:"sha"`
	}
	if err := im.getJSON(ctx, repoAPI+"/commits/"+strings.Join(segs, "/"), &c); err != nil {
		return "", err
	}
	if !shaRe.MatchString(c.SHA) {
		return "", importErr("GitHub answered %q for the commit of %q, not a commit id", c.SHA, ref)
	}
	return c.SHA, nil
}

func (im *Importer) getJSON(ctx context.Context, u string, v any) error {
	data, final, err := im.get(ctx, u, false)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return importErr("%s: unexpected answer: %v", final, err)
	}
	return nil
}

func ghErr(source string, err error) error {
	var se *httpStatusError
	if errors.As(err, &se) {
		switch se.code {
		case http.StatusNotFound:
			return importErr("%s: GitHub has no such public repository or ref (%s)", source, se.url)
		case http.StatusForbidden, http.StatusTooManyRequests:
			return importErr("%s: GitHub refused (%d), probably its rate limit for anonymous requests; try again later", source, se.code)
		}
	}
	return fmt.Errorf("%s: %w", source, err)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
