package scalesim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's utime and stime: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// Usage is a process's CPU time (user and system) and resident set.
type Usage struct {
	CPU time.Duration
	// RSS is the resident set now, HWM its peak (VmRSS, VmHWM).
	RSS, HWM int64
}

// ProcUsage reads pid's Usage from /proc/<pid>/stat and status.
func ProcUsage(pid int) (Usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	f, ok := statFields(b)
	if !ok || len(f) < 13 {
		return Usage{}, fmt.Errorf("cpu of %d: unexpected /proc/%d/stat %.100q", pid, pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("cpu of %d: utime %q stime %q", pid, f[11], f[12])
	}
	u := Usage{CPU: time.Duration(utime+stime) * clockTick}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("memory of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("memory of %d: %s %q", pid, k, v)
		}
		if k == "VmRSS" {
			u.RSS = kb << 10
		} else {
			u.HWM = kb << 10
		}
	}
	return u, nil
}

// statFields splits a /proc stat line (a process's or a thread's) into
// its fields from field 3 (state) on: f[k] is field k+3. The command
// name, field 2, is in parentheses and may hold spaces and parentheses,
// so fields are counted after the last closing one.
func statFields(b []byte) (f []string, ok bool) {
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// LoadAverage is the first three fields of /proc/loadavg ("1.37 1.50
// 2.31"), or the error's text.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return string(b)
	}
	return strings.Join(f[:3], " ")
}
