// Package cobj holds pointers to C objects.
package cobj

// #include <stdlib.h>
import "C"
import "unsafe"

// Object is anything backed by a C pointer.
type Object interface{ Ptr() unsafe.Pointer }

// Pointer is a C object.
type Pointer struct{ p unsafe.Pointer }

// Ptr returns the C pointer.
func (p *Pointer) Ptr() unsafe.Pointer { return p.p }

// Raw is exported but internal: other modules can't see it.
func Raw() *C.char { return nil }
