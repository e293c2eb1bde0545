//go:build !unix

package pipeline

// diskFree is unknown where statfs is unavailable.
func diskFree(string) (uint64, bool) { return 0, false }
