package download

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseChecksumFile(t *testing.T) {
	a := digest([]byte("a"))
	b := digest([]byte("b"))
	sha512 := strings.Repeat("ab", 64)
	for _, tc := range []struct {
		name, data, file, want string
		wantErr                error
	}{
		{"sha256sum text", a + "  other.img\n" + b + "  disk.img\n", "disk.img", b, nil},
		{"sha256sum binary", b + " *disk.img\n", "disk.img", b, nil},
		{"single space", b + " disk.img\n", "disk.img", b, nil},
		{"upper-case hex", strings.ToUpper(b) + "  disk.img\n", "disk.img", b, nil},
		{"crlf", a + "  x\r\n" + b + "  disk.img\r\n", "disk.img", b, nil},
		{"dot slash", b + "  ./disk.img\n", "disk.img", b, nil},
		{"subdirectory by base name", b + "  release/v1/disk.img\n", "disk.img", b, nil},
		{"exact beats base name", a + "  old/disk.img\n" + b + "  disk.img\n", "disk.img", b, nil},
		{"escaped name", `\` + b + `  dir\\disk.img` + "\n", `dir\disk.img`, b, nil},
		{"bsd", "SHA256 (disk.img) = " + b + "\n", "disk.img", b, nil},
		{"bsd name with parens", "SHA256 (disk (1).img) = " + b + "\n", "disk (1).img", b, nil},
		{"fedora signed", "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n# disk.img: 123 bytes\n" +
			"SHA256 (disk.img) = " + b + "\n-----BEGIN PGP SIGNATURE-----\niQIzBAEBCAAdFiEE\n-----END PGP SIGNATURE-----\n", "disk.img", b, nil},
		{"other algorithms skipped", "SHA512 (disk.img) = " + sha512 + "\nSHA256 (disk.img) = " + b + "\n", "disk.img", b, nil},
		{"bare digest", b + "\n", "disk.img", b, nil},
		{"duplicate agreeing", b + "  disk.img\nSHA256 (disk.img) = " + b + "\n", "disk.img", b, nil},
		{"missing name", a + "  other.img\n", "disk.img", "", ErrNoChecksum},
		{"only sha512", sha512 + "  disk.img\n", "disk.img", "", ErrNoChecksum},
		{"prefix is not a match", b + "  disk.img.sig\n", "disk.img", "", ErrNoChecksum},
		{"bare digest among named", b + "\n" + a + "  other.img\n", "disk.img", "", ErrNoChecksum},
		{"two bare digests", a + "\n" + b + "\n", "disk.img", "", ErrNoChecksum},
		{"empty", "", "disk.img", "", ErrNoChecksum},
		{"conflict", a + "  disk.img\n" + b + "  disk.img\n", "disk.img", "", errConflictMarker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseChecksumFile(tc.data, tc.file)
			switch {
			case tc.wantErr == errConflictMarker:
				if err == nil || !strings.Contains(err.Error(), "conflicting") {
					t.Fatalf("err = %v, want a conflict", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case got != tc.want:
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

var errConflictMarker = errors.New("conflict (test marker)")

func TestFetchChecksumFile(t *testing.T) {
	want := digest([]byte("kernel"))
	body := "SHA256 (vmlinuz) = " + want + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/CHECKSUM" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	local := filepath.Join(t.TempDir(), "SHA256SUMS")
	if err := os.WriteFile(local, []byte(want+"  vmlinuz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c Client
	for _, u := range []string{srv.URL + "/CHECKSUM", fileURL(local)} {
		got, err := FetchChecksumFile(context.Background(), &c, u, "vmlinuz")
		if err != nil || got != want {
			t.Errorf("FetchChecksumFile(%s) = %q, %v; want %q", u, got, err, want)
		}
	}
	_, err := FetchChecksumFile(context.Background(), &c, srv.URL+"/nope", "vmlinuz")
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("missing checksum file: err = %v, want a 404 *StatusError", err)
	}
	_, err = FetchChecksumFile(context.Background(), &c, srv.URL+"/CHECKSUM", "initrd")
	if !errors.Is(err, ErrNoChecksum) || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("unlisted file: err = %v, want ErrNoChecksum naming the URL", err)
	}
}
