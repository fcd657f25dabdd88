package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The egress proxy reads the TLS ClientHello a client sends through a
// CONNECT tunnel and checks the server name in it (SNI) against the
// agent's domain list: the name in CONNECT only picks the address, and
// one address (a CDN's) serves many sites.

// maxClientHello bounds the bytes the proxy reads before it decides.
// Real hellos are a few KiB (post-quantum key shares included).
const maxClientHello = 64 << 10

var (
	errNotTLS     = errors.New("the tunnel's first bytes are neither a TLS ClientHello nor an HTTP request")
	errBadHello   = errors.New("malformed TLS ClientHello")
	errNoSNI      = errors.New("the TLS ClientHello names no server (SNI); a domain list needs the name")
	errECH        = errors.New("the TLS ClientHello encrypts its server name (ECH), which a domain list can't check")
	errHelloLarge = fmt.Errorf("the TLS ClientHello is over %d bytes", maxClientHello)
)

// TLS constants (RFC 8446).
const (
	tlsRecordHandshake = 22
	tlsClientHello     = 1
	extServerName      = 0
	extECH             = 0xfe0d
)

// readClientHello reads TLS records from r until they hold the whole
// ClientHello and returns every byte read (to forward upstream) and the
// server name in it.
func readClientHello(r *bufio.Reader) (raw []byte, sni string, err error) {
	var hs []byte
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if len(raw) == 0 {
				return raw, "", fmt.Errorf("%w: %v", errNotTLS, err)
			}
			return raw, "", fmt.Errorf("%w: %v", errBadHello, err)
		}
		raw = append(raw, hdr[:]...)
		if hdr[0] != tlsRecordHandshake || hdr[1] != 3 {
			return raw, "", errNotTLS
		}
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if n == 0 || n > 1<<14 {
			return raw, "", fmt.Errorf("%w: record length %d", errBadHello, n)
		}
		if len(raw)+n > maxClientHello {
			return raw, "", errHelloLarge
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if k, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start+k], "", fmt.Errorf("%w: %v", errBadHello, err)
		}
		hs = append(hs, raw[start:]...)
		if len(hs) < 4 {
			continue
		}
		if hs[0] != tlsClientHello {
			return raw, "", fmt.Errorf("%w: handshake type %d, want ClientHello", errBadHello, hs[0])
		}
		need := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		if need > maxClientHello {
			return raw, "", errHelloLarge
		}
		if len(hs) >= need {
			sni, err := clientHelloSNI(hs[4:need])
			return raw, sni, err
		}
	}
}

// clientHelloSNI returns the host_name in the server_name extension of a
// ClientHello body (after the 4-byte handshake header). A hello without
// one is errNoSNI; one with encrypted_client_hello is errECH.
func clientHelloSNI(b []byte) (string, error) {
	p := parser(b)
	if !p.skip(2+32) || !p.skipVec(1) || !p.skipVec(2) || !p.skipVec(1) {
		return "", errBadHello
	}
	if len(p) == 0 {
		return "", errNoSNI // no extensions at all
	}
	exts, ok := p.vec(2)
	if !ok || len(p) != 0 {
		return "", errBadHello
	}
	sni, seen := "", false
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		body, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", errBadHello
		}
		switch typ {
		case extECH:
			return "", errECH
		case extServerName:
			if seen {
				return "", fmt.Errorf("%w: two server_name extensions", errBadHello)
			}
			seen = true
			list, ok := body.vec(2)
			if !ok || len(body) != 0 {
				return "", errBadHello
			}
			for len(list) > 0 {
				kind, ok1 := list.u8()
				name, ok2 := list.vec(2)
				if !ok1 || !ok2 {
					return "", errBadHello
				}
				if kind != 0 {
					continue
				}
				if sni != "" {
					return "", fmt.Errorf("%w: two host names in server_name", errBadHello)
				}
				if len(name) == 0 || len(name) > 255 {
					return "", fmt.Errorf("%w: server name of %d bytes", errBadHello, len(name))
				}
				for _, c := range name {
					if c <= ' ' || c >= 0x7f {
						return "", fmt.Errorf("%w: server name with byte %#x", errBadHello, c)
					}
				}
				sni = strings.ToLower(string(name))
			}
		}
	}
	if sni == "" {
		return "", errNoSNI
	}
	return sni, nil
}

// parser reads big-endian fields off the front of a byte slice.
type parser []byte

func (p *parser) skip(n int) bool {
	if len(*p) < n {
		return false
	}
	*p = (*p)[n:]
	return true
}

func (p *parser) u8() (byte, bool) {
	if len(*p) < 1 {
		return 0, false
	}
	v := (*p)[0]
	*p = (*p)[1:]
	return v, true
}

func (p *parser) u16() (uint16, bool) {
	if len(*p) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*p)
	*p = (*p)[2:]
	return v, true
}

// vec reads a vector with a lenBytes-byte length prefix.
func (p *parser) vec(lenBytes int) (parser, bool) {
	if len(*p) < lenBytes {
		return nil, false
	}
	n := 0
	for i := 0; i < lenBytes; i++ {
		n = n<<8 | int((*p)[i])
	}
	*p = (*p)[lenBytes:]
	if len(*p) < n {
		return nil, false
	}
	v := (*p)[:n]
	*p = (*p)[n:]
	return v, true
}

func (p *parser) skipVec(lenBytes int) bool {
	_, ok := p.vec(lenBytes)
	return ok
}
