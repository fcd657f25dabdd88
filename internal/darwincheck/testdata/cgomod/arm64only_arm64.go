package cgomod

// OnlyArm64 exists on arm64 builds only.
func OnlyArm64() {}
