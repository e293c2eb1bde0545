//go:build !unix

package pipeline

import "os"

// lockDataDir does not lock where flock is unavailable.
func lockDataDir(string) (*os.File, error) { return nil, nil }

// unlockDataDir has nothing to give up where nothing was locked.
func unlockDataDir(*os.File) {}
