package hostcli

import "github.com/osaurus/osaurus-sandbox/host"

// testOwner is what the binary passes (cmd/osaurus-sandbox): commands that
// change data open a short-lived owner of the data folder when none runs.
var testOwner = Owner{OpenData: host.OpenData}
