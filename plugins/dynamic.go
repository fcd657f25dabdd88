package plugins

import (
	"path"
	"regexp"
	"strings"
)

// DynamicHosts finds what in a shell command decides only at run time
// where the command connects, so no reading of the recipe can check it
// against the setup allowlist: command and process substitution
// ($(...), backticks, <(...)), curl's --connect-to and --resolve (a
// listed name sent to another address) and proxy options, eval, and the
// programs a command runs from files or program text (bash x.sh,
// python3 f.py, ./run, python3 -c, curl ... | sh). Each is a HostRef with
// Dynamic set and Text saying what was found. Arithmetic $((...)) is not
// a substitution. The list errs on the side of flagging: the network
// policy the command runs under is what actually holds.
func DynamicHosts(cmd string) []HostRef {
	var out []HostRef
	add := func(text string) {
		for _, r := range out {
			if r.Text == text {
				return
			}
		}
		out = append(out, HostRef{Dynamic: true, Text: text})
	}
	for i := 0; i < len(cmd); i++ {
		switch {
		case cmd[i] == '`':
			add("`...` (command substitution)")
		case cmd[i] == '$' && strings.HasPrefix(cmd[i:], "$(") && !strings.HasPrefix(cmd[i:], "$(("):
			add("$(...) (command substitution)")
		case (cmd[i] == '<' || cmd[i] == '>') && strings.HasPrefix(cmd[i+1:], "("):
			add(cmd[i:i+1] + "(...) (process substitution)")
		}
	}
	dynamicIn(cmd, 0, add)
	return out
}

// routeOptions are options that send a connection somewhere other than
// the host its URL names.
var routeOptions = []string{"--connect-to", "--resolve", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--doh-url", "--dns-servers", "--interface"}

// proxyEnv are environment variables that route a program's connections.
var proxyEnv = map[string]bool{"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "FTP_PROXY": true, "NO_PROXY": true, "RSYNC_PROXY": true}

// wrappers run the command that follows them.
var wrappers = map[string]bool{"sudo": true, "env": true, "exec": true, "nohup": true, "time": true, "nice": true, "timeout": true,
	"command": true, "builtin": true, "xargs": true, "stdbuf": true, "setsid": true, "ionice": true, "doas": true, "runuser": true, "su": true, "then": true, "do": true, "else": true, "!": true, "{": true}

var (
	interpreterRe = regexp.MustCompile(`^(python[0-9.]*|pypy[0-9.]*|node|nodejs|deno|bun|perl[0-9.]*|ruby[0-9.]*|php[0-9.]*|lua[0-9.]*|luajit|rscript|tclsh[0-9.]*|wish|pwsh|powershell|osascript|expect|awk|gawk|mawk|nawk)$`)
	shellRe       = regexp.MustCompile(`^(sh|bash|dash|zsh|ksh|mksh|ash|fish|busybox)$`)
	assignRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// inlineFlags run program text given on the command line.
var inlineFlags = map[string]bool{"-c": true, "-e": true, "-E": true, "--eval": true, "-r": true, "-p": true, "--print": true, "--command": true, "-command": true, "-Command": true}

// maxShellDepth bounds sh -c "sh -c ..." recursion.
const maxShellDepth = 4

func dynamicIn(cmd string, depth int, add func(string)) {
	for _, words := range shellCommands(cmd) {
		for _, w := range words {
			lw := strings.ToLower(w)
			for _, o := range routeOptions {
				if lw == o || strings.HasPrefix(lw, o+"=") {
					add(w + " (sends the connection to an address the URL does not name)")
				}
			}
			if name, _, ok := strings.Cut(w, "="); ok && assignRe.MatchString(w) && proxyEnv[strings.ToUpper(name)] {
				add(w + " (routes connections through a proxy)")
			}
		}
		// Leading assignments and wrappers: the command is what follows.
		i := 0
		for i < len(words) {
			w := words[i]
			switch {
			case assignRe.MatchString(w):
				i++
				continue
			case wrappers[w]:
				i++
				for i < len(words) && (strings.HasPrefix(words[i], "-") || assignRe.MatchString(words[i])) {
					i++
				}
				if w == "timeout" && i < len(words) {
					i++ // the duration
				}
				continue
			}
			break
		}
		if i >= len(words) {
			continue
		}
		argv0, args := words[i], words[i+1:]
		base := strings.ToLower(path.Base(argv0))
		switch {
		case strings.ContainsAny(argv0, "$`"):
			add(argv0 + " (a program named at run time)")
		case argv0 == "eval":
			add("eval (runs text built at run time)")
		case argv0 == "source" || argv0 == ".":
			if len(args) > 0 {
				add(argv0 + " " + args[0] + " (runs the file " + args[0] + ")")
			}
		case shellRe.MatchString(base) || interpreterRe.MatchString(base):
			interpreted(argv0, args, depth, add, shellRe.MatchString(base))
		case strings.Contains(argv0, "/") && !systemProgram(argv0):
			add(argv0 + " (runs the file " + argv0 + ")")
		}
	}
}

// systemProgram is an absolute path into the system's program folders.
func systemProgram(p string) bool {
	for _, d := range []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/"} {
		if strings.HasPrefix(p, d) && !strings.Contains(p[len(d):], "/") {
			return true
		}
	}
	return false
}

// interpreted flags what an interpreter runs: a file, inline program
// text, or its standard input. A shell's -c text is a command and is
// read as one instead.
func interpreted(argv0 string, args []string, depth int, add func(string), shell bool) {
	for j := 0; j < len(args); j++ {
		a := args[j]
		switch {
		case inlineFlags[a] || shell && strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c"):
			if shell && j+1 < len(args) && depth < maxShellDepth {
				dynamicIn(args[j+1], depth+1, add)
				return
			}
			add(argv0 + " " + a + " (runs program text that can build any address)")
			return
		case a == "-m" || a == "-f" || a == "-S":
			if j+1 < len(args) {
				add(argv0 + " " + a + " " + args[j+1] + " (runs code that can build any address)")
			}
			return
		case strings.HasPrefix(a, "-"):
			continue
		default:
			add(argv0 + " " + a + " (runs the file " + a + ", whose addresses are not checked)")
			return
		}
	}
	add(argv0 + " (runs program text from its input)")
}

// shellCommands splits cmd into simple commands, each a list of words,
// the way a POSIX shell splits words: quotes and backslashes undone,
// arithmetic $((...)) one word; ; & | ( ) ` and line ends separate
// commands, blanks, < and > only words. FindHosts reads the same words
// (shellWords).
func shellCommands(cmd string) [][]string {
	var cmds [][]string
	var words []string
	var cur strings.Builder
	inWord := false
	flushWord := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	flushCmd := func() {
		flushWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\\':
			if i+1 < len(cmd) {
				i++
				if cmd[i] != '\n' {
					cur.WriteByte(cmd[i])
					inWord = true
				}
			}
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				j = len(cmd) - i - 1
			}
			cur.WriteString(cmd[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte("\"\\$`\n", cmd[i+1]) >= 0 {
					i++
					if cmd[i] == '\n' {
						continue
					}
				}
				cur.WriteByte(cmd[i])
			}
		case c == '$' && strings.HasPrefix(cmd[i:], "$(("):
			// Arithmetic: a value, not a command.
			j := strings.Index(cmd[i:], "))")
			if j < 0 {
				j = len(cmd) - i - 2
			}
			cur.WriteString(cmd[i : i+j+2])
			inWord = true
			i += j + 1
		case strings.IndexByte(";&|()`\n\r", c) >= 0:
			flushCmd()
		case strings.IndexByte(" \t<>", c) >= 0:
			flushWord()
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flushCmd()
	return cmds
}
