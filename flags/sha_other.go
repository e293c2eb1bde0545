//go:build !amd64 || purego

package flags

const haveSHANI = false

func firstWordSHANI(*[64]byte) uint32 { panic("flags: no SHA extensions on this architecture") }
