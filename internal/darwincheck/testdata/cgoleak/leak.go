package cgoleak

// #include <stdlib.h>
import "C"

// Size leaks a C type into the exported API.
func Size() C.size_t { return 0 }
