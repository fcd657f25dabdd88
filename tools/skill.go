package tools

import (
	_ "embed"
)

// The Sandbox Plugin Creator skill: the text that teaches a model to
// author, test and register a plugin. It lives in skills/plugin-creator.md
// so it is read and reviewed as a document.
const (
	PluginCreatorSkillName  = "sandbox-plugin-creator"
	PluginCreatorSkillTitle = "Sandbox Plugin Creator"
)

//go:embed skills/plugin-creator.md
var pluginCreatorSkill string

// PluginCreatorSkillText is the skill's text (Markdown).
func PluginCreatorSkillText() string { return pluginCreatorSkill }

// PluginCreatorSkill reports whether the skill is injected for this
// agent now, under the Osaurus documentation's condition: autonomous exec
// and pluginCreate on (so sandbox_plugin_register is listed), no plugin
// tools installed (the skill is the backstop of an agent that has none),
// and the agent's pluginCreatorSkill setting not turned off.
func (t *Toolset) PluginCreatorSkill() bool {
	ae := t.agent.AutonomousExec
	if !ae.Enabled || !ae.PluginCreate || ae.PluginCreatorSkillOff {
		return false
	}
	if d := lookup("sandbox_plugin_register"); d == nil || t.allowed(d) != "" {
		return false
	}
	return len(t.pluginSpecs()) == 0
}
