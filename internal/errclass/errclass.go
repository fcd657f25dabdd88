// Package errclass lists the host packages' sentinel errors with their
// agentproto class, for the tests of the edges that translate errors: the
// CLI's exit codes (hostcli), tool envelopes (tools/envelope), the
// bridge's HTTP statuses (bridge.StatusOf) and the control socket
// (host/api/server). Each edge is tested over the whole list, so a
// sentinel without a class, or an edge that reads a sentinel instead of
// its class, fails a test. TestListIsComplete keeps the list in step with
// the source. Only tests import this package.
package errclass

import (
	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
	"github.com/osaurus/osaurus-sandbox/internal/termlaunch"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/provision/ext4"
	"github.com/osaurus/osaurus-sandbox/provision/initramfs"
	"github.com/osaurus/osaurus-sandbox/provision/kmod"
	"github.com/osaurus/osaurus-sandbox/provision/squashfs"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/vz/core"
)

// Sentinel is one host sentinel error and the class it belongs to.
type Sentinel struct {
	Name  string // import path below the module, then the name
	Err   error
	Class error
}

// Sentinels is every exported sentinel of the host packages but the
// window's (ui.ErrNoDisplay, of agentproto.ErrUnsupported: importing ui
// needs cgo).
var Sentinels = []Sentinel{
	{"agents.ErrAmbiguous", agents.ErrAmbiguous, agentproto.ErrInvalid},
	{"agents.ErrHomeExists", agents.ErrHomeExists, agentproto.ErrExists},
	{"agents.ErrInvalid", agents.ErrInvalid, agentproto.ErrInvalid},
	{"agents.ErrNotFound", agents.ErrNotFound, agentproto.ErrNotFound},
	{"assets.ErrAgentMissing", assets.ErrAgentMissing, agentproto.ErrUnsupported},
	{"bridge.ErrNotFound", bridge.ErrNotFound, agentproto.ErrNotFound},
	{"bridge.ErrQuota", bridge.ErrQuota, agentproto.ErrQuota},
	{"bridge.ErrTooLarge", bridge.ErrTooLarge, agentproto.ErrTooLarge},
	{"bridge.ErrUnavailable", bridge.ErrUnavailable, agentproto.ErrUnavailable},
	{"config.ErrInvalid", config.ErrInvalid, agentproto.ErrInvalid},
	{"host/api.ErrNoOwner", api.ErrNoOwner, agentproto.ErrUnavailable},
	{"host/api.ErrOwned", api.ErrOwned, agentproto.ErrExists},
	{"host/api.ErrOwnerGone", api.ErrOwnerGone, agentproto.ErrUnavailable},
	{"inference.ErrNotConfigured", inference.ErrNotConfigured, agentproto.ErrUnsupported},
	{"inference.ErrUpstream", inference.ErrUpstream, agentproto.ErrUpstream},
	{"internal/filelock.ErrLocked", filelock.ErrLocked, agentproto.ErrBusy},
	{"internal/termlaunch.ErrNoTerminal", termlaunch.ErrNoTerminal, agentproto.ErrUnsupported},
	{"netpolicy.ErrInvalid", netpolicy.ErrInvalid, agentproto.ErrInvalid},
	{"plugins.ErrDamaged", plugins.ErrDamaged, agentproto.ErrInvalid},
	{"plugins.ErrExists", plugins.ErrExists, agentproto.ErrExists},
	{"plugins.ErrImport", plugins.ErrImport, agentproto.ErrUpstream},
	{"plugins.ErrInvalid", plugins.ErrInvalid, agentproto.ErrInvalid},
	{"plugins.ErrNotFound", plugins.ErrNotFound, agentproto.ErrNotFound},
	{"projects.ErrExists", projects.ErrExists, agentproto.ErrExists},
	{"projects.ErrInvalid", projects.ErrInvalid, agentproto.ErrInvalid},
	{"projects.ErrNotFound", projects.ErrNotFound, agentproto.ErrNotFound},
	{"projects.ErrNotGranted", projects.ErrNotGranted, agentproto.ErrPermission},
	{"projects.ErrPending", projects.ErrPending, agentproto.ErrBusy},
	{"provision.ErrAmbiguousDir", provision.ErrAmbiguousDir, agentproto.ErrInvalid},
	{"provision.ErrImageNotPinned", provision.ErrImageNotPinned, agentproto.ErrInvalid},
	{"provision.ErrImagePlatform", provision.ErrImagePlatform, agentproto.ErrUnsupported},
	{"provision.ErrLayerDigest", provision.ErrLayerDigest, agentproto.ErrUpstream},
	{"provision.ErrNoBuiltin", provision.ErrNoBuiltin, agentproto.ErrNotFound},
	{"provision.ErrNotArm64Image", provision.ErrNotArm64Image, agentproto.ErrUnsupported},
	{"provision.ErrPackages", provision.ErrPackages, agentproto.ErrUpstream},
	{"provision.ErrNotProvisioned", provision.ErrNotProvisioned, agentproto.ErrUnavailable},
	{"provision/download.ErrChecksumMismatch", download.ErrChecksumMismatch, agentproto.ErrUpstream},
	{"provision/download.ErrNoChecksum", download.ErrNoChecksum, agentproto.ErrUpstream},
	{"provision/download.ErrPinConflict", download.ErrPinConflict, agentproto.ErrInvalid},
	{"provision/download.ErrStalled", download.ErrStalled, agentproto.ErrTimeout},
	{"provision/download.ErrUnpinned", download.ErrUnpinned, agentproto.ErrInvalid},
	{"provision/ext4.ErrDuplicateEntry", ext4.ErrDuplicateEntry, agentproto.ErrExists},
	{"provision/ext4.ErrInvalidOptions", ext4.ErrInvalidOptions, agentproto.ErrInvalid},
	{"provision/ext4.ErrUnsafePath", ext4.ErrUnsafePath, agentproto.ErrEscape},
	{"provision/initramfs.ErrClosed", initramfs.ErrClosed, agentproto.ErrInternal},
	{"provision/initramfs.ErrExists", initramfs.ErrExists, agentproto.ErrExists},
	{"provision/initramfs.ErrInvalidPath", initramfs.ErrInvalidPath, agentproto.ErrInvalid},
	{"provision/initramfs.ErrNoInit", initramfs.ErrNoInit, agentproto.ErrInvalid},
	{"provision/kmod.ErrBadName", kmod.ErrBadName, agentproto.ErrInvalid},
	{"provision/kmod.ErrNotFound", kmod.ErrNotFound, agentproto.ErrNotFound},
	{"provision/squashfs.ErrFormat", squashfs.ErrFormat, agentproto.ErrInvalid},
	{"provision/squashfs.ErrUnsupported", squashfs.ErrUnsupported, agentproto.ErrUnsupported},
	{"sandbox.ErrBusy", sandbox.ErrBusy, agentproto.ErrBusy},
	{"sandbox.ErrCoolingOff", sandbox.ErrCoolingOff, agentproto.ErrUnavailable},
	{"sandbox.ErrNotRunning", sandbox.ErrNotRunning, agentproto.ErrUnavailable},
	{"sandbox.ErrUnresponsive", sandbox.ErrUnresponsive, agentproto.ErrUnavailable},
	{"sandboxpath.ErrRejected", sandboxpath.ErrRejected, agentproto.ErrInvalid},
	{"secrets.ErrInvalid", secrets.ErrInvalid, agentproto.ErrInvalid},
	{"secrets.ErrNotFound", secrets.ErrNotFound, agentproto.ErrNotFound},
	{"secrets.ErrUnavailable", secrets.ErrUnavailable, agentproto.ErrUnavailable},
	{"store/events.ErrInvalid", events.ErrInvalid, agentproto.ErrInvalid},
	{"store/memory.ErrInvalid", memory.ErrInvalid, agentproto.ErrInvalid},
	{"store/memory.ErrNotFound", memory.ErrNotFound, agentproto.ErrNotFound},
	{"tools.ErrNoPluginLibrary", tools.ErrNoPluginLibrary, agentproto.ErrUnsupported},
	{"tools.ErrPluginCreateOff", tools.ErrPluginCreateOff, agentproto.ErrPermission},
	{"tools.ErrPluginQuota", tools.ErrPluginQuota, agentproto.ErrQuota},
	{"tools.ErrPluginTaken", tools.ErrPluginTaken, agentproto.ErrExists},
	{"tools.ErrSecretDenied", tools.ErrSecretDenied, agentproto.ErrPermission},
	{"tools/limit.ErrLimited", limit.ErrLimited, agentproto.ErrBusy},
	{"tools/mcpserver/connect.ErrChanged", connect.ErrChanged, agentproto.ErrBusy},
	{"tools/mcpserver/connect.ErrNotPlainJSON", connect.ErrNotPlainJSON, agentproto.ErrUnsupported},
	{"tools/mcpserver/connect.ErrUnknownClient", connect.ErrUnknownClient, agentproto.ErrInvalid},
	{"tools/mcpserver.ErrNotLoopback", mcpserver.ErrNotLoopback, agentproto.ErrInvalid},
	{"tools/runner.ErrBusy", runner.ErrBusy, agentproto.ErrBusy},
	{"tools/runner.ErrEmptyTask", runner.ErrEmptyTask, agentproto.ErrInvalid},
	{"tools/runner.ErrForbidden", runner.ErrForbidden, agentproto.ErrPermission},
	{"tools/runner.ErrNotFound", runner.ErrNotFound, agentproto.ErrNotFound},
	{"vm.ErrBootTimeout", vm.ErrBootTimeout, agentproto.ErrTimeout},
	{"vm.ErrNoVM", vm.ErrNoVM, agentproto.ErrUnavailable},
	{"vm.ErrUnsupported", vm.ErrUnsupported, agentproto.ErrUnsupported},
	{"vm.ErrVMDied", vm.ErrVMDied, agentproto.ErrUnavailable},
	{"vm/vz/core.ErrDiskFormat", core.ErrDiskFormat, agentproto.ErrUnsupported},
	{"vm/vz/core.ErrKernelFormat", core.ErrKernelFormat, agentproto.ErrUnsupported},
	{"vm/vz/core.ErrKilled", core.ErrKilled, agentproto.ErrUnavailable},
}
