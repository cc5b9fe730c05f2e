//go:build !linux

package startupmem

import "errors"

func pageOutExecutable() (int64, error) {
	return 0, errors.New("reclaiming the executable's pages is only supported on Linux")
}
