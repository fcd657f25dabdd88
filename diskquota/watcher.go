package diskquota

// watcher reports the paths that changed since the last drain.
type watcher interface {
	// add watches directory dir (not its subdirectories).
	add(dir string)
	// drain returns the changed paths; overflow means events were lost
	// and the caller must walk everything again.
	drain() (paths []string, overflow bool)
	// ok is false once the watcher can't follow every directory (out
	// of watches); the caller then walks on every refresh.
	ok() bool
	close()
}
