package hostcli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/config"
)

// subcommands are what completion offers after each command.
var subcommands = map[string][]string{
	"agent":      {"add", "list", "show", "set", "connect", "disconnect", "remove", "repair"},
	"secret":     {"set", "list", "remove"},
	"task":       {"list", "show", "cancel"},
	"memory":     {"list", "search", "remove"},
	"network":    {"log"},
	"plugin":     {"import", "update", "list", "show", "export", "duplicate", "install", "uninstall", "remove", "repair"},
	"config":     {"get", "set", "reset"},
	"project":    {"add", "list", "remove", "repair"},
	"ports":      {"close"},
	"checkpoint": {"create", "list", "restore", "remove"},
	"completion": {"bash", "zsh", "fish"},
	"help":       nil, // filled with the commands
}

// topCommands are the commands with their one-line summaries.
func topCommands() [][2]string {
	var out [][2]string
	for _, h := range helps {
		if !strings.Contains(h.name, " ") && !slices.Contains(machineCommands, h.name) {
			out = append(out, [2]string{h.name, h.summary})
		}
	}
	return out
}

func configKeys() []string {
	var keys []string
	for _, k := range config.KeyDocs() {
		keys = append(keys, k[0])
	}
	return keys
}

// completion prints a completion script for bash, zsh or fish.
func (c *cli) completion(_ context.Context, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox completion bash|zsh|fish")
		return ExitUsage
	}
	var names []string
	for _, t := range topCommands() {
		names = append(names, t[0])
	}
	keys := strings.Join(configKeys(), " ")
	clients := strings.ReplaceAll(clientIDs, "|", " ")
	var b strings.Builder
	switch args[0] {
	case "bash":
		b.WriteString("# bash completion for osaurus-sandbox: source <(osaurus-sandbox completion bash)\n")
		b.WriteString("_osaurus_sandbox() {\n  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} prev=${COMP_WORDS[COMP_CWORD-1]}\n  COMPREPLY=()\n")
		fmt.Fprintf(&b, "  if [ \"$prev\" = --client ]; then\n    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n", clients)
		fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n", strings.Join(names, " "))
		b.WriteString("  case \"$cmd\" in\n")
		for _, cmd := range names {
			subs := subcommands[cmd]
			if cmd == "help" {
				subs = names
			}
			if len(subs) == 0 && cmd != "config" {
				continue
			}
			fmt.Fprintf(&b, "  %s)\n    if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\"))", cmd, strings.Join(subs, " "))
			if cmd == "config" {
				fmt.Fprintf(&b, "\n    elif [ \"$COMP_CWORD\" -eq 3 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\"))", keys)
			}
			b.WriteString("; fi\n    ;;\n")
		}
		b.WriteString("  esac\n}\ncomplete -F _osaurus_sandbox osaurus-sandbox\n")
	case "zsh":
		b.WriteString("#compdef osaurus-sandbox\n# zsh completion for osaurus-sandbox: source <(osaurus-sandbox completion zsh), or save as _osaurus-sandbox in $fpath\n")
		b.WriteString("_osaurus_sandbox() {\n  local -a cmds\n  cmds=(\n")
		for _, t := range topCommands() {
			fmt.Fprintf(&b, "    %s\n", zshQuote(t[0]+":"+t[1]))
		}
		b.WriteString("  )\n  if (( CURRENT == 2 )); then\n    _describe 'command' cmds\n    return\n  fi\n")
		fmt.Fprintf(&b, "  if [[ $words[CURRENT-1] == --client ]]; then\n    compadd -- %s\n    return\n  fi\n  case $words[2] in\n", clients)
		for _, cmd := range names {
			subs := subcommands[cmd]
			if cmd == "help" {
				subs = names
			}
			if len(subs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "    %s)\n      if (( CURRENT == 3 )); then compadd -- %s", cmd, strings.Join(subs, " "))
			if cmd == "config" {
				fmt.Fprintf(&b, "; elif (( CURRENT == 4 )); then compadd -- %s", keys)
			}
			b.WriteString("; fi\n      ;;\n")
		}
		// Autoloaded from $fpath (the file _osaurus-sandbox is the function), it
		// completes; sourced, it registers itself.
		b.WriteString("  esac\n}\nif [ \"$funcstack[1]\" = _osaurus-sandbox ]; then\n  _osaurus_sandbox \"$@\"\nelse\n  compdef _osaurus_sandbox osaurus-sandbox\nfi\n")
	case "fish":
		b.WriteString("# fish completion for osaurus-sandbox: osaurus-sandbox completion fish > ~/.config/fish/completions/osaurus-sandbox.fish\n")
		b.WriteString("complete -c osaurus-sandbox -f\n")
		for _, t := range topCommands() {
			fmt.Fprintf(&b, "complete -c osaurus-sandbox -n __fish_use_subcommand -a %s -d %s\n", t[0], fishQuote(t[1]))
		}
		for _, cmd := range names {
			subs := subcommands[cmd]
			if cmd == "help" {
				subs = names
			}
			if len(subs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "complete -c osaurus-sandbox -n '__fish_seen_subcommand_from %s; and test (count (commandline -opc)) -eq 2' -a %s\n", cmd, fishQuote(strings.Join(subs, " ")))
		}
		fmt.Fprintf(&b, "complete -c osaurus-sandbox -n '__fish_seen_subcommand_from config; and test (count (commandline -opc)) -eq 3' -a %s\n", fishQuote(keys))
		fmt.Fprintf(&b, "complete -c osaurus-sandbox -n '__fish_seen_subcommand_from connect disconnect' -l client -x -a %s\n", fishQuote(clients))
	default:
		fmt.Fprintf(c.err, "osaurus-sandbox completion: unknown shell %q; use bash, zsh or fish\n", args[0])
		return ExitUsage
	}
	fmt.Fprint(c.out, b.String())
	return ExitOK
}

// zshQuote and fishQuote single-quote s for the shell.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
