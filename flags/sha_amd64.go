//go:build !purego

package flags

// firstWordSHANI is implemented in sha_amd64.s.
//
//go:noescape
func firstWordSHANI(block *[64]byte) uint32

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// haveSHANI: the CPU has the SHA extensions (CPUID leaf 7, EBX bit 29) and
// the SSSE3 and SSE4.1 instructions the block uses beside them (leaf 1,
// ECX bits 9 and 19).
var haveSHANI = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	_, ebx7, _, _ := cpuid(7, 0)
	return ecx1&(1<<9) != 0 && ecx1&(1<<19) != 0 && ebx7&(1<<29) != 0
}()
