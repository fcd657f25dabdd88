package squashfs

import "encoding/binary"

// Branch/call/jump (BCJ) filters make machine code compress better by
// turning the relative targets of branch instructions into absolute ones;
// decoding turns them back. Each function decodes a whole buffer in place,
// start being the stream position of buf[0] (0 unless the filter's
// properties say otherwise). Bytes too close to the end to hold a whole
// instruction were left alone by the encoder and are left alone here.

// unBCJX86 undoes the x86 filter, which rewrites the 32-bit operands of
// E8 (call) and E9 (jmp) opcodes whose top byte is 0x00 or 0xFF. A history
// of recent E8/E9 bytes decides which candidates the encoder skipped, so it
// must be replayed exactly.
func unBCJX86(buf []byte, start uint32) {
	allowed := [8]bool{true, true, true, false, true, false, false, false}
	bitNum := [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
	msByte := func(b byte) bool { return b == 0x00 || b == 0xFF }

	var mask uint32
	prev := -1 // index of the previous E8/E9 byte
	for i := 0; i < len(buf)-4; i++ {
		if buf[i]&0xFE != 0xE8 {
			continue
		}
		if d := i - prev; d > 3 {
			mask = 0
		} else {
			mask = (mask << (d - 1)) & 7
			if mask != 0 && (!allowed[mask] || msByte(buf[i+4-int(bitNum[mask])])) {
				prev = i
				mask = mask<<1 | 1
				continue
			}
		}
		prev = i
		if !msByte(buf[i+4]) {
			mask = mask<<1 | 1
			continue
		}
		src := binary.LittleEndian.Uint32(buf[i+1:])
		var dst uint32
		for {
			dst = src - (start + uint32(i) + 5)
			if mask == 0 {
				break
			}
			j := bitNum[mask] * 8
			if !msByte(byte(dst >> (24 - j))) {
				break
			}
			src = dst ^ (1<<(32-j) - 1)
		}
		// Keep 25 bits and sign-extend bit 24 over the top byte.
		dst &= 0x01FFFFFF
		dst |= -(dst & 0x01000000)
		binary.LittleEndian.PutUint32(buf[i+1:], dst)
		i += 4
	}
}

// unBCJARM undoes the ARM filter: BL instructions (top byte 0xEB) with a
// 24-bit word offset relative to the instruction plus 8.
func unBCJARM(buf []byte, start uint32) {
	for i := 0; i+4 <= len(buf); i += 4 {
		if buf[i+3] != 0xEB {
			continue
		}
		addr := uint32(buf[i]) | uint32(buf[i+1])<<8 | uint32(buf[i+2])<<16
		addr = (addr<<2 - (start + uint32(i) + 8)) >> 2
		buf[i], buf[i+1], buf[i+2] = byte(addr), byte(addr>>8), byte(addr>>16)
	}
}

// unBCJARMThumb undoes the ARM-Thumb filter: the two-halfword BL pair
// (F000 F800 pattern) with a 22-bit halfword offset relative to the
// instruction plus 4.
func unBCJARMThumb(buf []byte, start uint32) {
	for i := 0; i+4 <= len(buf); i += 2 {
		if buf[i+1]&0xF8 != 0xF0 || buf[i+3]&0xF8 != 0xF8 {
			continue
		}
		addr := (uint32(buf[i+1])&7)<<19 | uint32(buf[i])<<11 | (uint32(buf[i+3])&7)<<8 | uint32(buf[i+2])
		addr = (addr<<1 - (start + uint32(i) + 4)) >> 1
		buf[i+1] = 0xF0 | byte(addr>>19)&7
		buf[i] = byte(addr >> 11)
		buf[i+3] = 0xF8 | byte(addr>>8)&7
		buf[i+2] = byte(addr)
		i += 2
	}
}
