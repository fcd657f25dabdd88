//go:build darwin

package vz

// #include <stdlib.h>
import "C"

func brokenCall() { C.free(nil) }
