//go:build linux

package osthread

import "unsafe"

func unsafeName(s string) unsafe.Pointer {
	b := append([]byte(s), 0)
	return unsafe.Pointer(&b[0])
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
