package api

import "github.com/osaurus/osaurus-sandbox/internal/explain"

// The CLI and the window explain these sentinels by identity (explain
// matches no error text of the module's own).
func init() {
	explain.Register(ErrNoOwner, "The osaurus-sandbox app isn't running for this data folder.",
		"Open the window (`osaurus-sandbox`) or run `osaurus-sandbox start`, which starts it in the background; `osaurus-sandbox status` shows what runs.")
}
