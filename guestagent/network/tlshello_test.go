package network

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
)

// clientHello is the first flight crypto/tls sends for serverName ("" for
// none: an IP address as the name sends no SNI).
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	cfg := &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}
	go func() {
		tls.Client(a, cfg).Handshake()
	}()
	var out []byte
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, buf[:n]...)
	b.Close()
	return out
}

func TestReadClientHello(t *testing.T) {
	hello := clientHello(t, "Allowed.Example")
	// Split into one-byte-payload records? Keep the real record, and a
	// copy cut in two records, which a client may send.
	body := hello[5:]
	split := append([]byte{22, 3, 1, 0, 10}, body[:10]...)
	split = append(split, 22, 3, 1, byte((len(body)-10)>>8), byte(len(body)-10))
	split = append(split, body[10:]...)
	for name, in := range map[string][]byte{"one record": hello, "two records": split} {
		raw, sni, err := readClientHello(bufio.NewReader(bytes.NewReader(append(in, "after"...))))
		if err != nil || sni != "allowed.example" || !bytes.Equal(raw, in) {
			t.Errorf("%s: sni %q err %v, raw %d bytes of %d", name, sni, err, len(raw), len(in))
		}
	}
	if _, _, err := readClientHello(bufio.NewReader(bytes.NewReader(clientHello(t, "")))); !errors.Is(err, errNoSNI) {
		t.Errorf("hello without SNI: %v, want errNoSNI", err)
	}
	for name, in := range map[string]string{
		"HTTP":      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"truncated": string(hello[:len(hello)-3]),
		"alert":     "\x15\x03\x01\x00\x02\x02\x28",
		"huge":      "\x16\x03\x01\xff\xff",
	} {
		if _, sni, err := readClientHello(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("%s: accepted with SNI %q", name, sni)
		}
	}
}

func TestClientHelloSNIRefusesECH(t *testing.T) {
	// A hand-made hello: version, random, no session, one suite, null
	// compression, then SNI and an encrypted_client_hello extension.
	sniExt := []byte{0, 0, 0, 16, 0, 14, 0, 0, 11}
	sniExt = append(sniExt, "cdn.example"...)
	exts := append(append([]byte{}, sniExt...), 0xfe, 0x0d, 0, 1, 0)
	b := append(make([]byte, 2+32), 0, 0, 2, 0x13, 0x01, 1, 0, byte(len(exts)>>8), byte(len(exts)))
	b = append(b, exts...)
	if _, err := clientHelloSNI(b); !errors.Is(err, errECH) {
		t.Fatalf("ECH hello: %v, want errECH", err)
	}
	b2 := append(make([]byte, 2+32), 0, 0, 2, 0x13, 0x01, 1, 0, byte(len(sniExt)>>8), byte(len(sniExt)))
	if sni, err := clientHelloSNI(append(b2, sniExt...)); err != nil || sni != "cdn.example" {
		t.Fatalf("plain hello: %q %v", sni, err)
	}
}

// FuzzClientHello: any bytes from a tunnel either fail or give a name
// that is in them, and never read past maxClientHello.
func FuzzClientHello(f *testing.F) {
	f.Add(clientHello(f, "a.example.com"))
	f.Add(clientHello(f, ""))
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, sni, err := readClientHello(bufio.NewReader(bytes.NewReader(in)))
		if len(raw) > maxClientHello || !bytes.HasPrefix(in, raw) {
			t.Fatalf("read %d bytes, not a prefix of the input", len(raw))
		}
		if err == nil && (sni == "" || !bytes.Contains(bytes.ToLower(raw), []byte(sni))) {
			t.Fatalf("SNI %q not in the hello", sni)
		}
	})
}
