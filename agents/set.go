package agents

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// SettingKeys are the keys of `osaurus-sandbox agent set` (the CLI's
// help and docs/agents.md list each; a test holds them to it).
var SettingKeys = []string{"name", "enabled", "maxCommandsPerTurn", "pluginCreate", "pluginCreatorSkill", "backgroundProcesses",
	"backgroundKeepsAwake", "dispatchTo", "network", "projects", "diskGB", "maxProcesses", "memoryMB", "cpuWeight"}

// Set changes one setting by the name `osaurus-sandbox agent set` takes
// (an "autonomousExec." prefix is allowed); the registry validates the
// result when it stores it. dispatchTo and projects are not set here: they
// name other agents and projects, which the owner resolves.
func (a *Agent) Set(key, value string) error {
	ae := &a.AutonomousExec
	flag := map[string]*bool{
		"enabled": &ae.Enabled, "pluginCreate": &ae.PluginCreate,
		"backgroundProcesses": &ae.BackgroundProcesses,
	}
	skillOn := !ae.PluginCreatorSkillOff
	flag["pluginCreatorSkill"] = &skillOn
	defer func() { ae.PluginCreatorSkillOff = !skillOn }()
	awake := !ae.BackgroundKeepsAwakeOff
	flag["backgroundKeepsAwake"] = &awake
	defer func() { ae.BackgroundKeepsAwakeOff = !awake }()
	key = strings.TrimPrefix(key, "autonomousExec.")
	switch {
	case key == "name":
		a.Name = value
	case key == "network":
		// The old boolean spellings still work: on means outbound.
		if b, ok := map[string]bool{"true": true, "on": true, "false": false, "off": false}[strings.ToLower(value)]; ok {
			value = netpolicy.Migrate(b)
		}
		return ae.SetNetwork(value)
	case key == "diskGB":
		g, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return &ValidationError{Field: key, Got: strconv.Quote(value), Want: fmt.Sprintf("a number of GB, %g–%g", MinDiskGB, MaxDiskGB)}
		}
		a.DiskGB = g
	case key == "maxCommandsPerTurn":
		n, err := strconv.Atoi(value)
		if err != nil {
			return &ValidationError{Field: key, Got: strconv.Quote(value), Want: "a whole number"}
		}
		ae.MaxCommandsPerTurn = n
	case a.Resources.Field(key) != nil:
		n, err := strconv.Atoi(value)
		if err != nil {
			return &ValidationError{Field: key, Got: strconv.Quote(value), Want: "a whole number"}
		}
		*a.Resources.Field(key) = n
	case flag[key] != nil:
		b, ok := map[string]bool{"true": true, "on": true, "yes": true, "1": true, "false": false, "off": false, "no": false, "0": false}[strings.ToLower(value)]
		if !ok {
			return &ValidationError{Field: key, Got: strconv.Quote(value), Want: "true or false"}
		}
		*flag[key] = b
	default:
		return &ValidationError{Field: "key", Got: strconv.Quote(key), Want: "one of " + strings.Join(SettingKeys, ", ")}
	}
	return nil
}
