package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// floodRounds is the consumer's work per message, the same in every
// program of the flood workload: rounds of xorshift32 (13, 17, 5) over the
// value's low 32 bits, about 100 ns (see bench/flood.c).
const floodRounds = 28

func floodWork(v int64) uint32 {
	x := uint32(v)
	for i := 0; i < floodRounds; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
	}
	return x
}

// floodCap is the consumer's mailbox: a buffered channel, which blocks the
// producer when it is full. 4,096 was the fastest of the capacities swept
// (1 to 65,536, README.md), ahead of the 1,024 that counter and fanin use;
// VATPEER_FLOOD_CAP overrides it (for sweeps).
func floodCap() int {
	if s := os.Getenv("VATPEER_FLOOD_CAP"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 {
			return v
		}
	}
	return 4096
}

func floodProducer(out chan<- int64, n int) {
	for i := 1; i <= n; i++ {
		out <- int64(i)
	}
}

func flood(sz []int) {
	n := sz[0]
	box := make(chan int64, floodCap())
	start := time.Now()
	go floodProducer(box, n)
	var count, sum int64
	var digest uint32
	for count < int64(n) {
		v := <-box
		digest ^= floodWork(v)
		sum += v
		count++
	}
	elapsed := time.Since(start)
	want := int64(n) * int64(n+1) / 2
	fmt.Printf("flood: %d messages, sum %d (want %d), digest %08x, capacity %d\n",
		count, sum, want, digest, cap(box))
	report(int64(n), elapsed, -1, sum == want && count == int64(n))
}
