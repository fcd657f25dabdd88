package diskquota

// MaxWatchesPerAgent bounds the directories the Tracker watches for one
// agent (its home, or what it owns outside homes). inotify watches come
// from the host user's max_user_watches, which the user's editor and sync
// tools share: an agent making a directory per watch would otherwise
// exhaust it. Directories over the bound are re-read instead, in turn,
// about rescanBudget entries a refresh, so they are still counted.
const MaxWatchesPerAgent = 1024

// rescanBudget bounds the entries (directories and what they list) one
// refresh re-reads of the unwatched directories: what a refresh costs the
// host stays bounded however many directories an agent makes (a single
// directory is read whole), and each is read again within a few rounds.
const rescanBudget = 2000

// watcher reports the paths that changed since the last drain.
type watcher interface {
	// add watches directory dir (not its subdirectories) on behalf of
	// owner; false when it does not (owner at its bound, or an error),
	// and the caller must re-read dir itself.
	add(dir, owner string) bool
	// drain returns the changed paths; overflow means events were lost
	// and the caller must walk everything again.
	drain() (paths []string, overflow bool)
	// ok is false once the watcher can't follow every directory (out
	// of watches); the caller then walks on every refresh.
	ok() bool
	close()
}
