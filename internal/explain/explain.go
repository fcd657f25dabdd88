// Package explain turns the errors a user meets most (an untrusted
// certificate, a name that doesn't resolve, a full disk, no app running)
// into a sentence that says what went wrong and what to do, keeping the
// raw error for the log. The window shows the sentence; the CLI prints it
// above the detail.
//
// The module's own errors are recognised by identity and class, never by
// their text: a package registers a sentence for its sentinel (Register),
// matched with errors.Is, and a class's sentinel keeps its class across the
// control socket (errdefs). Only errors from outside the module (the
// standard library's TLS, DNS and network errors, which cross the socket
// as text) are matched by their words as well as their type.
package explain

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// Explained is an error as a person reads it.
type Explained struct {
	// Sentence says what went wrong; Fix what to do about it. Both are
	// empty when no rule knows the error.
	Sentence, Fix string
	// Detail is the raw error, for the log and the "details" line.
	Detail string
}

// Known reports whether a rule recognised the error.
func (e Explained) Known() bool { return e.Sentence != "" }

// Short is the sentence and the fix, or the raw error when no rule knows
// it.
func (e Explained) Short() string {
	if !e.Known() {
		return e.Detail
	}
	if e.Fix == "" {
		return e.Sentence
	}
	return e.Sentence + " " + e.Fix
}

// Long is Short with the raw error on a line of its own below it.
func (e Explained) Long() string {
	if !e.Known() {
		return e.Detail
	}
	return e.Short() + "\nDetail: " + e.Detail
}

// known are the registered sentinels' sentences, in registration order.
var known struct {
	sync.RWMutex
	list []registered
}

type registered struct {
	err           error
	sentence, fix string
}

// Register gives sentinel, and every error that is it (errors.Is), a
// sentence and a fix; the package defining the sentinel calls it from an
// init function. The first match in registration order wins, before any
// rule for errors from outside the module.
func Register(sentinel error, sentence, fix string) {
	known.Lock()
	defer known.Unlock()
	known.list = append(known.list, registered{sentinel, sentence, fix})
}

// Error explains err. A nil err explains as the zero Explained.
func Error(err error) Explained {
	if err == nil {
		return Explained{}
	}
	msg := err.Error()
	ex := Explained{Detail: msg}
	known.RLock()
	for _, r := range known.list {
		if errors.Is(err, r.err) {
			ex.Sentence, ex.Fix = r.sentence, r.fix
			break
		}
	}
	known.RUnlock()
	if ex.Known() {
		return ex
	}
	for _, r := range rules {
		if s, fix, ok := r(err, msg); ok {
			ex.Sentence, ex.Fix = s, fix
			return ex
		}
	}
	return ex
}

// Text is Error(err).Long(): what the CLI prints.
func Text(err error) string { return Error(err).Long() }

// rule recognises one kind of error from outside the module. Order
// matters: the first that matches wins, so the specific ones come before
// the general (connection refused).
type rule func(err error, msg string) (sentence, fix string, ok bool)

var rules = []rule{
	diskFull, tempFile, untrusted, certName, certExpired, redirects,
	htmlPage, httpStatus, dns, refused, timeout, permission,
}

func diskFull(err error, msg string) (string, string, bool) {
	if !errors.Is(err, syscall.ENOSPC) && !strings.Contains(msg, "no space left on device") {
		return "", "", false
	}
	where := "the disk"
	if p := pathIn(msg); p != "" {
		where = "the disk holding " + p
	}
	return "The disk is full.", "Free some space on " + where + " and try again (`osaurus-sandbox remove` deletes the VM's files and downloads, keeping your work).", true
}

// tempName matches internal/atomicfile's temporary names:
// DIR/.NAME.tmp-DIGITS.
var tempName = regexp.MustCompile(`(\S*/)?\.([^/\s]+)\.tmp-\d+`)

// tempFile: a write through internal/atomicfile failed; name the file the
// user knows, not the temporary one.
func tempFile(_ error, msg string) (string, string, bool) {
	m := tempName.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	file := m[1] + m[2]
	reason := "it could not be written"
	switch {
	case strings.Contains(msg, "permission denied"):
		reason = "you aren't allowed to write in its folder"
	case strings.Contains(msg, "read-only file system"):
		reason = "its file system is read-only"
	}
	return fmt.Sprintf("%s was not saved: %s (the file is unchanged).", file, reason),
		"Check that its folder exists and is yours to write, then try again.", true
}

func untrusted(err error, msg string) (string, string, bool) {
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) && !strings.Contains(msg, "certificate signed by unknown authority") &&
		!strings.Contains(msg, "certificate is not trusted") {
		return "", "", false
	}
	return "The server's certificate isn't trusted" + hostPart(msg) + ".",
		"Behind a corporate proxy that inspects HTTPS? Add its root certificate to the system's trust store (Debian: copy it to /usr/local/share/ca-certificates/ and run update-ca-certificates; macOS: Keychain Access, System) or set SSL_CERT_FILE to a bundle that includes it, then try again.", true
}

func certName(err error, msg string) (string, string, bool) {
	var he x509.HostnameError
	if !errors.As(err, &he) && !strings.Contains(msg, "certificate is valid for") {
		return "", "", false
	}
	return "The server's certificate belongs to another name" + hostPart(msg) + ".",
		"Check the address; a proxy or captive portal may be answering in the server's place.", true
}

func certExpired(err error, msg string) (string, string, bool) {
	var ie x509.CertificateInvalidError
	if !(errors.As(err, &ie) && ie.Reason == x509.Expired) && !strings.Contains(msg, "certificate has expired") {
		return "", "", false
	}
	return "The server's certificate has expired or isn't valid yet" + hostPart(msg) + ".",
		"Check that this computer's clock is right; if it is, the server must renew its certificate.", true
}

func redirects(_ error, msg string) (string, string, bool) {
	if !strings.Contains(msg, "redirects") || !(strings.Contains(msg, "stopped after") || strings.Contains(msg, "more than")) {
		return "", "", false
	}
	return "The server sent the request round too many redirects" + hostPart(msg) + ".",
		"Check the address (a login page or a proxy may be redirecting it) and open it in a browser to see where it leads.", true
}

// htmlPage: JSON or a file was expected and a web page came: a captive
// portal, a proxy's error page, a wrong URL.
func htmlPage(_ error, msg string) (string, string, bool) {
	low := strings.ToLower(msg)
	if !strings.Contains(low, "<html") && !strings.Contains(low, "<!doctype html") &&
		!strings.Contains(msg, "invalid character '<' looking for beginning of value") {
		return "", "", false
	}
	return "The server answered with a web page instead of the data asked for" + hostPart(msg) + ".",
		"A Wi-Fi login page, a proxy's error page or a wrong address does this: open the address in a browser, sign in or correct it, and try again.", true
}

// httpStatus: provision/download's StatusError and similar "HTTP status"
// texts.
var statusCode = regexp.MustCompile(`(?:HTTP status|status code:?|HTTP|GET \S+:) (\d{3})\b`)

func httpStatus(_ error, msg string) (string, string, bool) {
	m := statusCode.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	switch code := m[1]; {
	case code == "404" || code == "410":
		return "The server has no file at that address" + hostPart(msg) + " (HTTP " + code + ").",
			"Check the address, e.g. the image manifest's (`osaurus-sandbox config get imageManifest`).", true
	case code == "401" || code == "403" || code == "407":
		return "The server refused access" + hostPart(msg) + " (HTTP " + code + ").",
			"The file may need signing in, or a proxy may need your credentials; check with whoever runs it.", true
	case code == "429":
		return "The server asks to slow down" + hostPart(msg) + " (HTTP 429).", "Wait a few minutes and try again.", true
	case code[0] == '5':
		return "The server had a problem of its own" + hostPart(msg) + " (HTTP " + code + ").",
			"Try again later; if it persists, check the server's status page.", true
	}
	return "", "", false
}

func dns(err error, msg string) (string, string, bool) {
	var de *net.DNSError
	name := ""
	if errors.As(err, &de) {
		name = de.Name
	} else if !strings.Contains(msg, "no such host") && !strings.Contains(msg, "server misbehaving") &&
		!strings.Contains(msg, "Temporary failure in name resolution") {
		return "", "", false
	} else if m := lookupName.FindStringSubmatch(msg); m != nil {
		name = m[1]
	}
	s := "The server's name couldn't be looked up"
	if name != "" {
		s = fmt.Sprintf("The name %s couldn't be looked up", name)
	}
	return s + ".", "Check that this computer is online and the address is spelt right; behind a proxy, set HTTPS_PROXY.", true
}

var lookupName = regexp.MustCompile(`lookup (\S+?)(?: on \S+)?: `)

func refused(err error, msg string) (string, string, bool) {
	if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(msg, "connection refused") {
		return "", "", false
	}
	return "Nothing answers at that address" + hostPart(msg) + ".",
		"The server isn't running, or the address or port is wrong: check both and try again.", true
}

func timeout(err error, msg string) (string, string, bool) {
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) &&
		!strings.Contains(msg, "context deadline exceeded") && !strings.Contains(msg, "i/o timeout") &&
		!strings.Contains(msg, "Client.Timeout exceeded") {
		return "", "", false
	}
	return "It took too long and was given up" + hostPart(msg) + ".",
		"The network or the server is slow or unreachable: check the connection (and HTTPS_PROXY behind a proxy) and try again.", true
}

func permission(err error, msg string) (string, string, bool) {
	if !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) && !strings.Contains(msg, "permission denied") {
		return "", "", false
	}
	what := "a file"
	if p := pathIn(msg); p != "" {
		what = p
	}
	return "The app isn't allowed to use " + what + ".", "Check that it belongs to you (the data folder must be yours), then try again.", true
}

var urlHost = regexp.MustCompile(`https?://([^/\s"']+)`)

// hostPart is " (HOST)" for the first URL in msg, or "".
func hostPart(msg string) string {
	if m := urlHost.FindStringSubmatch(msg); m != nil {
		return " (" + m[1] + ")"
	}
	return ""
}

var (
	anyURL  = regexp.MustCompile(`\S+://\S+`)
	absPath = regexp.MustCompile(`/[^\s:"']+`)
)

// pathIn finds the first absolute path in msg outside a URL.
func pathIn(msg string) string {
	return absPath.FindString(anyURL.ReplaceAllString(msg, ""))
}
