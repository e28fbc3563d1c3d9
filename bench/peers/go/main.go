// Go peer of the libvat benchmark suite: one binary, one workload per name.
// The workload is chosen by the executable's name (build.sh links ring,
// counter, ... to it) or by a first argument naming it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

type workload struct {
	sizes []string // names of the positional sizes, in order
	defs  []int    // their defaults
	run   func(sizes []int)
}

var workloads = map[string]workload{
	"ring":     {[]string{"N", "M"}, []int{1000000, 200}, ring},
	"counter":  {[]string{"K"}, []int{3000000}, counter},
	"fanin":    {[]string{"P", "K"}, []int{4, 1000000}, fanin},
	"selfsend": {[]string{"A", "K"}, []int{8, 10000000}, selfsend},
	"skynet":   {[]string{"L"}, []int{1000000}, skynet},
	"chain":    {[]string{"N"}, []int{100000}, chain},
	"pingpong": {[]string{"R"}, []int{1000000}, pingpong},
	"spawn":    {[]string{"N"}, []int{1000000}, spawn},
	"flood":    {[]string{"N"}, []int{10000000}, flood},
}

var (
	name    string
	cur     workload
	workers int
)

func usage(code int) {
	w := cur
	fmt.Printf("usage: %s [-w W] %s\n", name, strings.Join(w.sizes, " "))
	fmt.Printf("  -w W  worker threads (GOMAXPROCS), default %d\n", runtime.NumCPU())
	for i, s := range w.sizes {
		fmt.Printf("  %s     default %d\n", s, w.defs[i])
	}
	os.Exit(code)
}

func posInt(s string) (int, bool) {
	v, err := strconv.Atoi(s)
	return v, err == nil && v > 0
}

func main() {
	args := os.Args[1:]
	name = filepath.Base(os.Args[0])
	if _, ok := workloads[name]; !ok {
		if len(args) == 0 || workloads[args[0]].run == nil {
			fmt.Println("usage: vatpeer-go WORKLOAD [-w W] SIZES...  (ring counter fanin selfsend skynet chain pingpong spawn flood)")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	w := workloads[name]
	cur = w
	workers = runtime.NumCPU()
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		usage(0)
	}
	if len(args) > 0 && args[0] == "-w" {
		var ok bool
		if len(args) < 2 {
			usage(2)
		}
		if workers, ok = posInt(args[1]); !ok {
			usage(2)
		}
		args = args[2:]
	}
	if len(args) > len(w.sizes) {
		usage(2)
	}
	sizes := append([]int(nil), w.defs...)
	for i, a := range args {
		v, ok := posInt(a)
		if !ok {
			usage(2)
		}
		sizes[i] = v
	}
	runtime.GOMAXPROCS(workers)
	// GOGC=400 unless the environment sets GOGC: the sweep in README.md
	// found it faster than the default 100 for the workloads that allocate
	// (skynet, chain) and no slower for the others.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	w.run(sizes)
}

// report prints the RESULT line; messages < 0 or setup < 0 leave keys out.
func report(messages int64, elapsed time.Duration, setup time.Duration, ok bool) {
	secs := elapsed.Seconds()
	line := fmt.Sprintf("RESULT workload=%s workers=%d", name, workers)
	if messages >= 0 {
		line += fmt.Sprintf(" messages=%d", messages)
	}
	line += fmt.Sprintf(" seconds=%.6f", secs)
	if messages >= 0 && secs > 0 {
		line += fmt.Sprintf(" rate=%.0f", float64(messages)/secs)
	}
	if setup >= 0 {
		line += fmt.Sprintf(" setup_seconds=%.6f", setup.Seconds())
	}
	if !ok {
		fmt.Println(line + " ok=0")
		os.Exit(1)
	}
	fmt.Println(line)
}
