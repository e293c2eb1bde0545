//go:build race

package compiler_test

// raceEnabled: the race detector makes CUE evaluation ~10× slower, and
// repeating a property many times finds no more races than a few times.
const raceEnabled = true
