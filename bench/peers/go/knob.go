package main

import (
	"os"
	"strconv"
)

// chanCap is a workload's mailbox capacity: def, the fastest of the sweep
// in README.md, unless VATPEER_GO_CAP names another (for sweeps; 0 is an
// unbuffered channel).
func chanCap(def int) int {
	if s := os.Getenv("VATPEER_GO_CAP"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 {
			return v
		}
	}
	return def
}
