//go:build darwin

// Package cgomod imitates vz's shape: exported Go API over cgo internals.
package cgomod

/*
#include <stdlib.h>
static int answer(void) { return 42; }
*/
import "C"
import (
	"errors"
	"os"
	"unsafe"

	"example.com/cgomod/internal/cobj"
)

// ErrOld is returned on old systems.
var ErrOld = errors.New("too old")

var version = C.answer() // unexported, typed by C: dropped

var limit C.int = 3 // unexported, typed: kept without value

// Mode is an enum.
type Mode int

const (
	ModeA Mode = iota
	ModeB
)

// Attachment can only be implemented here.
type Attachment interface {
	cobj.Object
	attachment()
}

type base struct{}

func (*base) attachment() {}

// File is an Attachment.
type File struct {
	*cobj.Pointer
	*base
	path string
	fd   C.int
	buf  *C.char
}

var _ Attachment = (*File)(nil)

// NewFile opens a file attachment.
func NewFile(path string, appendMode bool, m Mode) (*File, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if version < 1 {
		return nil, ErrOld
	}
	return &File{path: path, fd: C.int(m)}, nil
}

// Use takes any Attachment.
func Use(a Attachment) (bool, error) { return a != nil, nil }

// Open is an exported func with a Go-only signature over os.
func (f *File) Open() (*os.File, error) { return os.Open(f.path) }

var handler = func() int { return int(C.answer()) }
