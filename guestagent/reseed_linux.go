package guestagent

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minSeed is the least host randomness Hello mixes in: a shorter seed
// is a confused host, not a source of entropy.
const minSeed = 16

// reseed mixes seed into the kernel's random pool, credited as entropy
// (RNDADDENTROPY), and makes the kernel's CRNG take a new key from the
// pool now (RNDRESEEDCRNG). Without it, every VM resumed from one saved
// memory image would go on with the same CRNG state, so two of them would
// make the same keys and TLS randoms. Both need CAP_SYS_ADMIN: only the
// VM's PID 1 calls it.
func reseed(seed []byte) error {
	if len(seed) < minSeed {
		return fmt.Errorf("seed of %d bytes, want at least %d", len(seed), minSeed)
	}
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	fd := f.Fd()
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return fmt.Errorf("RNDADDENTROPY: %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.RNDRESEEDCRNG, 0); e != 0 {
		return fmt.Errorf("RNDRESEEDCRNG: %w", e)
	}
	return nil
}
