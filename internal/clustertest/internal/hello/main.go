// Command hello prints the hostname of the engine node it runs on and
// exits: the smallest workload that shows where a task ran.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from", os.Getenv("NODE"))
}
