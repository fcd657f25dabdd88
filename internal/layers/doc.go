// Package layers holds only tests: they check the package layers that
// docs/architecture.md draws against the module's real imports.
//
// This one non-test file lets builds of ./... for every platform (the
// darwin check's among them) find a package here.
package layers
