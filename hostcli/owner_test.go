package hostcli

import "github.com/osaurus/osaurus-sandbox/host"

// testOwner is what the binary injects for the commands that change the
// data files when no owner runs: this process becomes a short-lived owner
// (host.OpenData), as it does in the real binary.
var testOwner = Owner{OpenData: host.OpenData}
