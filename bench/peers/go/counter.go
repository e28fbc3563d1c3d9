package main

import (
	"fmt"
	"time"
)

// A counter message: add(n) when reply is nil, get otherwise.
type counterMsg struct {
	n     int64
	reply chan int64
}

func counterActor(in <-chan counterMsg) {
	var count int64
	for msg := range in {
		if msg.reply == nil {
			count += msg.n
		} else {
			msg.reply <- count
		}
	}
}

func counter(sz []int) {
	k := sz[0]
	box := make(chan counterMsg, chanCap(1024))
	go counterActor(box)
	start := time.Now()
	for i := 0; i < k; i++ {
		box <- counterMsg{n: 100}
	}
	reply := make(chan int64)
	box <- counterMsg{reply: reply}
	got := <-reply
	elapsed := time.Since(start)
	fmt.Printf("counter: %d adds, count %d\n", k, got)
	report(int64(k), elapsed, -1, got == 100*int64(k))
}
