package main

import (
	"fmt"
	"time"
)

// skynetActor is one node: a leaf replies its ordinal, an inner node spawns
// ten children and replies the sum of their replies.
func skynetActor(parent chan<- int64, num, size int64) {
	if size == 1 {
		parent <- num
		return
	}
	box := make(chan int64, chanCap(10))
	step := size / 10
	for i := int64(0); i < 10; i++ {
		go skynetActor(box, num+i*step, step)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-box
	}
	parent <- sum
}

// skynet L: L leaves (a power of ten), L + L/10 + ... + 1 actors.
func skynet(sz []int) {
	l := int64(sz[0])
	actors := int64(0)
	for p := int64(1); p <= l; p *= 10 {
		if p == l {
			actors = (10*l - 1) / 9
		}
	}
	if actors == 0 {
		fmt.Println("skynet: L must be a power of ten")
		usage(2)
	}
	start := time.Now()
	root := make(chan int64, 1)
	go skynetActor(root, 0, l)
	sum := <-root
	elapsed := time.Since(start)
	fmt.Printf("skynet: sum %d in %.3f s\n", sum, elapsed.Seconds())
	report(actors, elapsed, -1, sum == l*(l-1)/2)
}
