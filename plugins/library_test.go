package plugins

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type recordingUninstaller struct {
	mu  sync.Mutex
	ids []string
	err error
}

func (r *recordingUninstaller) UninstallEverywhere(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return r.err
}

func TestLibraryVersionsAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "plugins")
	lib, err := OpenLibrary(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := loadTestdata(t, "python-data-tools.json")
	src := Origin{Kind: OriginURL, Location: "https://example.test/p.json"}
	e, changed, err := lib.Save(ctx, p, src)
	if err != nil || !changed || e.Current().Number != 1 {
		t.Fatalf("first save: %v %v %+v", err, changed, e)
	}
	// The same recipe from the same place is not a new version.
	if e, changed, err = lib.Save(ctx, p, src); err != nil || changed || len(e.Versions) != 1 {
		t.Fatalf("identical save: %v %v %d", err, changed, len(e.Versions))
	}
	p.Version = "1.1.0"
	if e, changed, err = lib.Save(ctx, p, src); err != nil || !changed || e.Current().Number != 2 {
		t.Fatalf("second save: %v %v", err, changed)
	}
	p.Version = "9.9.9" // the library keeps its own copy
	if e.Current().Recipe.Version != "1.1.0" {
		t.Fatal("library shares the caller's recipe")
	}

	// A new process (the app restarted) sees the same library.
	lib2, err := OpenLibrary(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lib2.Get("python-data-tools")
	if err != nil || len(got.Versions) != 2 || got.Versions[0].Recipe.Version != "1.0.0" || got.Current().Origin != src {
		t.Fatalf("reopened: %v %+v", err, got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "python-data-tools.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", err, fi)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

func TestLibraryHistoryCap(t *testing.T) {
	lib, _ := OpenLibrary(t.TempDir())
	p := loadTestdata(t, "minimal.json")
	for i := 0; i < MaxVersions+5; i++ {
		p.Description = strings.Repeat("x", i+1)
		if _, _, err := lib.Save(context.Background(), p, Origin{Kind: OriginEditor}); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := lib.Get("hello")
	if len(e.Versions) != MaxVersions || e.Versions[0].Number != 6 || e.Current().Number != MaxVersions+5 {
		t.Fatalf("versions %d, first %d, current %d", len(e.Versions), e.Versions[0].Number, e.Current().Number)
	}
}

func TestLibraryRefusesInvalid(t *testing.T) {
	lib, _ := OpenLibrary(t.TempDir())
	p := loadTestdata(t, "minimal.json")
	p.Files = map[string]string{"../escape": "x"}
	if _, _, err := lib.Save(context.Background(), p, Origin{Kind: OriginEditor}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if list, err := lib.List(); err != nil || len(list) != 0 {
		t.Fatalf("an invalid recipe was stored: %v %v", list, err)
	}
	for _, id := range []string{"../x", "a/b", "", "A"} {
		if _, err := lib.Get(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q): %v", id, err)
		}
	}
}

func TestLibraryExportDuplicateRemove(t *testing.T) {
	ctx := context.Background()
	lib, _ := OpenLibrary(t.TempDir())
	un := &recordingUninstaller{}
	lib.Uninstaller = un
	p := loadTestdata(t, "python-data-tools.json")
	if _, _, err := lib.Save(ctx, p, Origin{Kind: OriginFile, Location: "/tmp/p.json"}); err != nil {
		t.Fatal(err)
	}

	b, err := lib.Export("python-data-tools")
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeBytes(b)
	if err != nil || q.Validate() != nil || q.Name != p.Name || len(q.Files) != 1 {
		t.Fatalf("export doesn't import: %v", err)
	}

	d1, err := lib.Duplicate(ctx, "python-data-tools")
	if err != nil || d1.ID != "python-data-tools-copy" || d1.Current().Origin.Kind != OriginDuplicate || len(d1.Versions) != 1 {
		t.Fatalf("duplicate: %v %+v", err, d1)
	}
	d2, err := lib.Duplicate(ctx, "python-data-tools")
	if err != nil || d2.ID != "python-data-tools-copy-2" {
		t.Fatalf("second duplicate: %v %+v", err, d2)
	}
	if _, err := lib.Create(ctx, p, Origin{Kind: OriginEditor}); !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}

	// A failed uninstall keeps the plugin.
	un.err = errors.New("VM not running")
	if err := lib.Remove(ctx, "python-data-tools"); err == nil || !strings.Contains(err.Error(), "nothing was removed") {
		t.Fatal(err)
	}
	if _, err := lib.Get("python-data-tools"); err != nil {
		t.Fatal("removed despite the failed uninstall")
	}
	un.err = nil
	if err := lib.Remove(ctx, "python-data-tools"); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Get("python-data-tools"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if err := lib.Remove(ctx, "python-data-tools"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if len(un.ids) != 2 || un.ids[1] != "python-data-tools" {
		t.Fatalf("uninstaller calls %v", un.ids)
	}
	list, err := lib.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %d", err, len(list))
	}
}

// Concurrent saves from several goroutines (standing in for the app and
// CLI commands, which share the file lock) must not lose versions.
func TestLibraryConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lib, err := OpenLibrary(dir) // separate Library values, one file lock
			if err != nil {
				t.Error(err)
				return
			}
			p := loadTestdata(t, "minimal.json")
			p.Description = strings.Repeat("d", i+1)
			if _, _, err := lib.Save(ctx, p, Origin{Kind: OriginEditor}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	lib, _ := OpenLibrary(dir)
	e, err := lib.Get("hello")
	if err != nil || len(e.Versions) != 8 || e.Current().Number != 8 {
		t.Fatalf("%v: %d versions", err, len(e.Versions))
	}
}

func TestLibraryDamagedFileIsReported(t *testing.T) {
	dir := t.TempDir()
	lib, _ := OpenLibrary(dir)
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.List(); err == nil || !strings.Contains(err.Error(), "damaged library file") {
		t.Fatal(err)
	}
}
