package demo

import "fmt"

// integer is what plural counts.
type integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// plural returns n and noun, the noun with an s unless n is 1: "1
// checkpoint", "2 checkpoints", "0 checkpoints". noun may be a phrase
// ending in its noun ("committed transaction").
func plural[T integer](n T, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
