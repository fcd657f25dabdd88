package errclass

import (
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
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
	"github.com/osaurus/osaurus-sandbox/remotes"
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

// sentinel is one host sentinel error and the class it belongs to.
type sentinel struct {
	Name  string // import path below the module, then the name
	Err   error
	Class error
}

// sentinels is every exported sentinel of the host packages but the
// window's (ui.ErrNoDisplay, of errdefs.ErrUnsupported: importing ui
// needs cgo).
var sentinels = []sentinel{
	{"agentproto/control.ErrBusy", control.ErrBusy, errdefs.ErrBusy},
	{"agentproto/control.ErrNotRunning", control.ErrNotRunning, errdefs.ErrUnavailable},
	{"agents.ErrAmbiguous", agents.ErrAmbiguous, errdefs.ErrInvalid},
	{"agents.ErrHomeExists", agents.ErrHomeExists, errdefs.ErrExists},
	{"agents.ErrInvalid", agents.ErrInvalid, errdefs.ErrInvalid},
	{"agents.ErrNotFound", agents.ErrNotFound, errdefs.ErrNotFound},
	{"assets.ErrAgentMissing", assets.ErrAgentMissing, errdefs.ErrUnsupported},
	{"bridge.ErrNotFound", bridge.ErrNotFound, errdefs.ErrNotFound},
	{"bridge.ErrQuota", bridge.ErrQuota, errdefs.ErrQuota},
	{"bridge.ErrTooLarge", bridge.ErrTooLarge, errdefs.ErrTooLarge},
	{"bridge.ErrUnavailable", bridge.ErrUnavailable, errdefs.ErrUnavailable},
	{"checkpoint.ErrExists", checkpoint.ErrExists, errdefs.ErrExists},
	{"checkpoint.ErrName", checkpoint.ErrName, errdefs.ErrInvalid},
	{"checkpoint.ErrNotFound", checkpoint.ErrNotFound, errdefs.ErrNotFound},
	{"checkpoint.ErrLimit", checkpoint.ErrLimit, errdefs.ErrQuota},
	{"config.ErrChanged", config.ErrChanged, errdefs.ErrBusy},
	{"config.ErrInvalid", config.ErrInvalid, errdefs.ErrInvalid},
	{"host/api.ErrNoOwner", api.ErrNoOwner, errdefs.ErrUnavailable},
	{"host/api.ErrOwned", api.ErrOwned, errdefs.ErrExists},
	{"host.ErrNoMemory", host.ErrNoMemory, errdefs.ErrUnavailable},
	{"host.ErrNoEventLog", host.ErrNoEventLog, errdefs.ErrUnavailable},
	{"host.ErrNoConsoleLog", host.ErrNoConsoleLog, errdefs.ErrNotFound},
	{"host/api.ErrOwnerGone", api.ErrOwnerGone, errdefs.ErrUnavailable},
	{"host/api/client.ErrClosed", client.ErrClosed, errdefs.ErrUnavailable},
	{"host/api/client.ErrLinkLost", client.ErrLinkLost, errdefs.ErrUnavailable},
	{"host/api/client.ErrUnreachable", client.ErrUnreachable, errdefs.ErrUnavailable},
	{"inference.ErrNotConfigured", inference.ErrNotConfigured, errdefs.ErrUnsupported},
	{"inference.ErrUpstream", inference.ErrUpstream, errdefs.ErrUpstream},
	{"internal/filelock.ErrLocked", filelock.ErrLocked, errdefs.ErrBusy},
	{"internal/termlaunch.ErrNoTerminal", termlaunch.ErrNoTerminal, errdefs.ErrUnsupported},
	{"netpolicy.ErrInvalid", netpolicy.ErrInvalid, errdefs.ErrInvalid},
	{"plugins.ErrDamaged", plugins.ErrDamaged, errdefs.ErrInvalid},
	{"plugins.ErrExists", plugins.ErrExists, errdefs.ErrExists},
	{"plugins.ErrImport", plugins.ErrImport, errdefs.ErrUpstream},
	{"plugins.ErrInvalid", plugins.ErrInvalid, errdefs.ErrInvalid},
	{"plugins.ErrNotFound", plugins.ErrNotFound, errdefs.ErrNotFound},
	{"projects.ErrExists", projects.ErrExists, errdefs.ErrExists},
	{"projects.ErrInvalid", projects.ErrInvalid, errdefs.ErrInvalid},
	{"projects.ErrTooBig", projects.ErrTooBig, errdefs.ErrInvalid},
	{"projects.ErrNotFound", projects.ErrNotFound, errdefs.ErrNotFound},
	{"projects.ErrNotGranted", projects.ErrNotGranted, errdefs.ErrPermission},
	{"projects.ErrPending", projects.ErrPending, errdefs.ErrBusy},
	{"provision.ErrAmbiguousDir", provision.ErrAmbiguousDir, errdefs.ErrInvalid},
	{"provision.ErrImageNotPinned", provision.ErrImageNotPinned, errdefs.ErrInvalid},
	{"provision.ErrImagePlatform", provision.ErrImagePlatform, errdefs.ErrUnsupported},
	{"provision.ErrLayerDigest", provision.ErrLayerDigest, errdefs.ErrUpstream},
	{"provision.ErrNoBuiltin", provision.ErrNoBuiltin, errdefs.ErrNotFound},
	{"provision.ErrNotArm64Image", provision.ErrNotArm64Image, errdefs.ErrUnsupported},
	{"provision.ErrPackages", provision.ErrPackages, errdefs.ErrUpstream},
	{"provision.ErrNotProvisioned", provision.ErrNotProvisioned, errdefs.ErrUnavailable},
	{"provision/download.ErrChecksumMismatch", download.ErrChecksumMismatch, errdefs.ErrUpstream},
	{"provision/download.ErrNoChecksum", download.ErrNoChecksum, errdefs.ErrUpstream},
	{"provision/download.ErrPinConflict", download.ErrPinConflict, errdefs.ErrInvalid},
	{"provision/download.ErrStalled", download.ErrStalled, errdefs.ErrTimeout},
	{"provision/download.ErrUnpinned", download.ErrUnpinned, errdefs.ErrInvalid},
	{"provision/ext4.ErrDuplicateEntry", ext4.ErrDuplicateEntry, errdefs.ErrExists},
	{"provision/ext4.ErrInvalidOptions", ext4.ErrInvalidOptions, errdefs.ErrInvalid},
	{"provision/ext4.ErrUnsafePath", ext4.ErrUnsafePath, errdefs.ErrEscape},
	{"provision/initramfs.ErrClosed", initramfs.ErrClosed, errdefs.ErrInternal},
	{"provision/initramfs.ErrExists", initramfs.ErrExists, errdefs.ErrExists},
	{"provision/initramfs.ErrInvalidPath", initramfs.ErrInvalidPath, errdefs.ErrInvalid},
	{"provision/initramfs.ErrNoInit", initramfs.ErrNoInit, errdefs.ErrInvalid},
	{"provision/kmod.ErrBadName", kmod.ErrBadName, errdefs.ErrInvalid},
	{"provision/kmod.ErrNotFound", kmod.ErrNotFound, errdefs.ErrNotFound},
	{"provision/squashfs.ErrFormat", squashfs.ErrFormat, errdefs.ErrInvalid},
	{"provision/squashfs.ErrUnsupported", squashfs.ErrUnsupported, errdefs.ErrUnsupported},
	{"remotes.ErrExists", remotes.ErrExists, errdefs.ErrExists},
	{"remotes.ErrInvalid", remotes.ErrInvalid, errdefs.ErrInvalid},
	{"remotes.ErrNoFolder", remotes.ErrNoFolder, errdefs.ErrNotFound},
	{"remotes.ErrNotFound", remotes.ErrNotFound, errdefs.ErrNotFound},
	{"sandbox.ErrCoolingOff", sandbox.ErrCoolingOff, errdefs.ErrUnavailable},
	{"sandbox.ErrSleeping", sandbox.ErrSleeping, errdefs.ErrUnavailable},
	{"sandbox.ErrUnresponsive", sandbox.ErrUnresponsive, errdefs.ErrUnavailable},
	{"sandboxpath.ErrRejected", sandboxpath.ErrRejected, errdefs.ErrInvalid},
	{"secrets.ErrInvalid", secrets.ErrInvalid, errdefs.ErrInvalid},
	{"secrets.ErrNotFound", secrets.ErrNotFound, errdefs.ErrNotFound},
	{"secrets.ErrUnavailable", secrets.ErrUnavailable, errdefs.ErrUnavailable},
	{"store/events.ErrInvalid", events.ErrInvalid, errdefs.ErrInvalid},
	{"store/memory.ErrInvalid", memory.ErrInvalid, errdefs.ErrInvalid},
	{"store/memory.ErrNotFound", memory.ErrNotFound, errdefs.ErrNotFound},
	{"tools.ErrArtifactChanged", tools.ErrArtifactChanged, errdefs.ErrPermission},
	{"tools.ErrNoPluginLibrary", tools.ErrNoPluginLibrary, errdefs.ErrUnsupported},
	{"tools.ErrPluginCreateOff", tools.ErrPluginCreateOff, errdefs.ErrPermission},
	{"tools.ErrPluginQuota", tools.ErrPluginQuota, errdefs.ErrQuota},
	{"tools.ErrPluginTaken", tools.ErrPluginTaken, errdefs.ErrExists},
	{"tools.ErrSecretDenied", tools.ErrSecretDenied, errdefs.ErrPermission},
	{"tools/limit.ErrLimited", limit.ErrLimited, errdefs.ErrBusy},
	{"tools/mcpserver/connect.ErrChanged", connect.ErrChanged, errdefs.ErrBusy},
	{"tools/mcpserver/connect.ErrNotPlainJSON", connect.ErrNotPlainJSON, errdefs.ErrUnsupported},
	{"tools/mcpserver/connect.ErrUnknownClient", connect.ErrUnknownClient, errdefs.ErrInvalid},
	{"tools/mcpserver.ErrNotLoopback", mcpserver.ErrNotLoopback, errdefs.ErrInvalid},
	{"tools/runner.ErrBusy", runner.ErrBusy, errdefs.ErrBusy},
	{"tools/runner.ErrEmptyTask", runner.ErrEmptyTask, errdefs.ErrInvalid},
	{"tools/runner.ErrForbidden", runner.ErrForbidden, errdefs.ErrPermission},
	{"tools/runner.ErrNotFound", runner.ErrNotFound, errdefs.ErrNotFound},
	{"vm.ErrBootTimeout", vm.ErrBootTimeout, errdefs.ErrTimeout},
	{"vm.ErrNoVM", vm.ErrNoVM, errdefs.ErrUnavailable},
	{"vm.ErrUnsupported", vm.ErrUnsupported, errdefs.ErrUnsupported},
	{"vm.ErrVMDied", vm.ErrVMDied, errdefs.ErrUnavailable},
	{"vm/vz/core.ErrDiskFormat", core.ErrDiskFormat, errdefs.ErrUnsupported},
	{"vm/vz/core.ErrKernelFormat", core.ErrKernelFormat, errdefs.ErrUnsupported},
	{"vm/vz/core.ErrKilled", core.ErrKilled, errdefs.ErrUnavailable},
}
