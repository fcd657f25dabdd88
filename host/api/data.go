package api

// DataOps are the owner's operations on the plugin library, the agents'
// memory, the event log, the bridge config and the tasks: the owner is the
// one writer of each.
type DataOps interface {
}
