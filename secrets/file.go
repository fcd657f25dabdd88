//go:build unix

package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
	"github.com/zalando/go-keyring"
	"golang.org/x/sys/unix"
)

// File is the file secret store (secretStore "file"), for a server with no
// desktop keychain: every value in one JSON file, in plain text. What
// protects it is its mode (0600), its folder's (0700) and the disk's; so
// it refuses a file or folder others could read or change, one that is
// not the user's own, and a symbolic link or anything but a regular file.
type File struct {
	Path string // config.Paths.SecretsFile
	// Lock serialises writers: Path is replaced by rename, so a lock on
	// it would be on the old inode.
	Lock string // config.Paths.SecretsLock
}

// fileVersion is the format of the file; another is refused, not guessed.
const fileVersion = 1

// fileData is the file: service → entry (agent/KEY) → value.
type fileData struct {
	Version int                          `json:"version"`
	Secrets map[string]map[string]string `json:"secrets"`
}

// lockWait bounds the wait for another writer: a write holds the lock for
// one read and one atomic replace, so a longer wait means a stuck process.
const lockWait = 30 * time.Second

// currentUID is whom the file and folder must belong to; a variable so a
// test can play another user.
var currentUID = os.Geteuid

func fileErr(err error, format string, a ...any) error {
	return &storeError{msg: "secret store: " + fmt.Sprintf(format, a...), err: err}
}

// Where names the store in messages.
func (f File) Where() string { return "the secrets file " + f.Path }

func (f File) Get(service, user string) (string, error) {
	d, err := f.read()
	if err != nil {
		return "", err
	}
	v, ok := d.Secrets[service][user]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}

func (f File) Set(service, user, value string) error {
	// JSON strings hold text: other bytes would be stored changed.
	if !utf8.ValidString(value) {
		return fmt.Errorf("%w: the file secret store holds text, and this value is not UTF-8; nothing was stored", ErrInvalid)
	}
	return f.update(func(d *fileData) (bool, error) {
		if d.Secrets[service] == nil {
			d.Secrets[service] = map[string]string{}
		}
		d.Secrets[service][user] = value
		return true, nil
	})
}

func (f File) Delete(service, user string) error {
	return f.update(func(d *fileData) (bool, error) {
		if _, ok := d.Secrets[service][user]; !ok {
			return false, keyring.ErrNotFound
		}
		delete(d.Secrets[service], user)
		if len(d.Secrets[service]) == 0 {
			delete(d.Secrets, service)
		}
		return true, nil
	})
}

// openDir opens the file's folder and checks it on the opened descriptor;
// os.ErrNotExist when there is none (no secrets yet).
func (f File) openDir() (*os.File, error) {
	dir := filepath.Dir(f.Path)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, os.ErrNotExist
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, fileErr(err, "%s is not a folder but a symbolic link or a file; it must be a folder of yours that only you can open: move it away", dir)
	case err != nil:
		return nil, fileErr(err, "opening %s: %v", dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	if err := checkSafe(d, true); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openIn opens name in the checked folder dir without following a link,
// and checks what it opened. O_NONBLOCK: opening a FIFO must not hang.
func openIn(dir *os.File, path string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), filepath.Base(path), flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, os.ErrNotExist
	case errors.Is(err, unix.ELOOP):
		return nil, fileErr(err, "%s is a symbolic link; the secrets must be a regular file of yours: move it away", path)
	case err != nil:
		return nil, fileErr(err, "opening %s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkSafe(f, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkSafe checks an opened file or folder with fstat: checking by name
// would check whatever the name pointed at a moment earlier.
func checkSafe(f *os.File, dir bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fileErr(err, "%s: %v", f.Name(), err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileErr(nil, "%s: can't tell who owns it", f.Name())
	}
	mode, fix := "600", "a regular file"
	if dir {
		mode, fix = "700", "a folder"
	}
	switch {
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		return fileErr(nil, "%s is not %s but %s; move it away", f.Name(), fix, kind(fi.Mode()))
	case int(st.Uid) != currentUID():
		return fileErr(nil, "%s belongs to user id %d, not to you (%d), so someone else may have written or read it; check it, then `chown %d %s` (or move it away)", f.Name(), st.Uid, currentUID(), currentUID(), f.Name())
	case fi.Mode().Perm()&0o077 != 0:
		return fileErr(nil, "%s can be opened by other users (mode %04o), and it holds secrets; run `chmod %s %s`, and change any secret others may have read", f.Name(), fi.Mode().Perm(), mode, f.Name())
	}
	return nil
}

// kind names a file's type in messages.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// read returns the file's content; an absent file (or folder) is empty.
func (f File) read() (*fileData, error) {
	dir, err := f.openDir()
	if errors.Is(err, os.ErrNotExist) {
		return emptyData(), nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return f.readIn(dir)
}

func emptyData() *fileData {
	return &fileData{Version: fileVersion, Secrets: map[string]map[string]string{}}
}

func (f File) readIn(dir *os.File) (*fileData, error) {
	file, err := openIn(dir, f.Path, unix.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return emptyData(), nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, fileErr(err, "reading %s: %v", f.Path, err)
	}
	// Writes replace the file whole, so an empty one never held secrets.
	if len(bytes.TrimSpace(b)) == 0 {
		return emptyData(), nil
	}
	d := &fileData{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(d)
	if err == nil && dec.More() {
		err = errors.New("more follows the JSON object")
	}
	if err == nil && d.Version != fileVersion {
		err = fmt.Errorf("version %d, and this app reads version %d", d.Version, fileVersion)
	}
	if err == nil && d.Secrets == nil {
		err = errors.New(`no "secrets" object`)
	}
	if err != nil {
		return nil, fileErr(err, "%s is damaged (%v); nothing was read from it or written to it. Repair it by hand, or restore it from a backup; or move it aside (`mv %s %s.damaged`) and store the secrets again with `osaurus-sandbox secret set`", f.Path, err, f.Path, f.Path)
	}
	return d, nil
}

// update applies change to the file under the lock, then replaces the
// file atomically (temp file, fsync, rename); nothing is written when
// change reports no change or fails.
func (f File) update(change func(*fileData) (bool, error)) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return fileErr(err, "creating %s: %v", filepath.Dir(f.Path), err)
	}
	dir, err := f.openDir()
	if errors.Is(err, os.ErrNotExist) {
		return fileErr(err, "%s vanished while it was being created", filepath.Dir(f.Path))
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	if filepath.Dir(f.Lock) != filepath.Dir(f.Path) {
		return fileErr(nil, "the lock %s is not beside %s", f.Lock, f.Path)
	}
	lf, err := openIn(dir, f.Lock, unix.O_RDWR|unix.O_CREAT)
	if err != nil {
		return err
	}
	defer lf.Close() // releases the lock
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	if err := filelock.LockFile(ctx, lf); err != nil {
		return fileErr(err, "waiting for another process writing %s: %v", f.Path, err)
	}
	d, err := f.readIn(dir)
	if err != nil {
		return err
	}
	changed, err := change(d)
	if err != nil || !changed {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fileErr(err, "encoding %s: %v", f.Path, err)
	}
	if err := atomicfile.WriteFile(f.Path, buf.Bytes(), 0o600); err != nil {
		return fileErr(err, "writing %s: %v; it still holds what it held before", f.Path, err)
	}
	return nil
}
