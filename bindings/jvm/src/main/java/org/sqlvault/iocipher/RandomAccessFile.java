package org.sqlvault.iocipher;

import java.io.Closeable;
import java.io.DataInput;
import java.io.DataInputStream;
import java.io.DataOutput;
import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UTFDataFormatException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;

/**
 * IOCipher's {@code RandomAccessFile}: reads and writes anywhere in a container file, with
 * {@link DataInput} and {@link DataOutput}. Modes as {@link java.io.RandomAccessFile}'s:
 * {@code "r"} (the file must exist), {@code "rw"}, {@code "rws"}, {@code "rwd"} (created if
 * missing; writes commit at the latest on {@link #close()}). Each call is one native call:
 * read and write in large arrays for throughput.
 */
public class RandomAccessFile implements DataInput, DataOutput, Closeable {
    private final SeekableByteChannel ch;
    private final byte[] one = new byte[8];

    /** Opens {@code file} in {@code mode}. */
    public RandomAccessFile(File file, String mode) throws FileNotFoundException {
        this(file.getPath(), mode);
    }

    /** Opens the file at {@code path} in {@code mode}. */
    public RandomAccessFile(String path, String mode) throws FileNotFoundException {
        String m;
        switch (mode) {
            case "r":
                m = "r";
                break;
            case "rw":
            case "rws":
            case "rwd":
                m = "rw";
                break;
            default:
                throw new IllegalArgumentException("Illegal mode \"" + mode + "\" must be one of \"r\", \"rw\", \"rws\", or \"rwd\"");
        }
        try {
            ch = VirtualFileSystem.get().mounted().openChannel(File.vaultPath(path), m);
        } catch (FileNotFoundException e) {
            throw e;
        } catch (IOException | IllegalStateException e) {
            FileNotFoundException f = new FileNotFoundException(path + ": " + e.getMessage());
            f.initCause(e);
            throw f;
        }
    }

    /** One byte, or -1 at the end of the file. */
    public int read() throws IOException {
        int n = read(one, 0, 1);
        return n <= 0 ? -1 : one[0] & 0xff;
    }

    /** Up to {@code len} bytes into {@code b[off..]}; -1 at the end of the file. */
    public int read(byte[] b, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        return ch.read(ByteBuffer.wrap(b, off, len));
    }

    /** Up to {@code b.length} bytes; -1 at the end of the file. */
    public int read(byte[] b) throws IOException {
        return read(b, 0, b.length);
    }

    @Override
    public void readFully(byte[] b) throws IOException {
        readFully(b, 0, b.length);
    }

    @Override
    public void readFully(byte[] b, int off, int len) throws IOException {
        int n = 0;
        while (n < len) {
            int r = read(b, off + n, len - n);
            if (r < 0) {
                throw new EOFException();
            }
            n += r;
        }
    }

    @Override
    public int skipBytes(int n) throws IOException {
        if (n <= 0) {
            return 0;
        }
        long pos = getFilePointer();
        long len = length();
        long to = Math.min(len, pos + n);
        seek(to);
        return (int) (to - pos);
    }

    /** Writes one byte at the file pointer. */
    @Override
    public void write(int b) throws IOException {
        one[0] = (byte) b;
        write(one, 0, 1);
    }

    @Override
    public void write(byte[] b) throws IOException {
        write(b, 0, b.length);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        ch.write(ByteBuffer.wrap(b, off, len));
    }

    /** Moves the file pointer to {@code pos} (past the end is allowed; a write there extends the file). */
    public void seek(long pos) throws IOException {
        if (pos < 0) {
            throw new IOException("Negative seek offset");
        }
        ch.position(pos);
    }

    /** The file pointer. */
    public long getFilePointer() throws IOException {
        return ch.position();
    }

    /** The file's length. */
    public long length() throws IOException {
        return ch.size();
    }

    /** Truncates or extends (with zeros) the file to {@code newLength}. */
    public void setLength(long newLength) throws IOException {
        if (newLength < 0) {
            throw new IOException("negative length");
        }
        long pos = ch.position();
        long size = ch.size();
        if (newLength < size) {
            ch.truncate(newLength);
        } else if (newLength > size) {
            ch.position(newLength - 1);
            ch.write(ByteBuffer.wrap(new byte[1]));
        }
        ch.position(Math.min(pos, newLength));
    }

    /** Commits the writes and closes the file. */
    @Override
    public void close() throws IOException {
        ch.close();
    }

    // ---- DataInput -----------------------------------------------------------------

    private byte[] readN(int n) throws IOException {
        readFully(one, 0, n);
        return one;
    }

    @Override
    public boolean readBoolean() throws IOException {
        return readUnsignedByte() != 0;
    }

    @Override
    public byte readByte() throws IOException {
        return (byte) readUnsignedByte();
    }

    @Override
    public int readUnsignedByte() throws IOException {
        int b = read();
        if (b < 0) {
            throw new EOFException();
        }
        return b;
    }

    @Override
    public short readShort() throws IOException {
        return ByteBuffer.wrap(readN(2), 0, 2).getShort();
    }

    @Override
    public int readUnsignedShort() throws IOException {
        return readShort() & 0xffff;
    }

    @Override
    public char readChar() throws IOException {
        return (char) readUnsignedShort();
    }

    @Override
    public int readInt() throws IOException {
        return ByteBuffer.wrap(readN(4), 0, 4).getInt();
    }

    @Override
    public long readLong() throws IOException {
        return ByteBuffer.wrap(readN(8), 0, 8).getLong();
    }

    @Override
    public float readFloat() throws IOException {
        return Float.intBitsToFloat(readInt());
    }

    @Override
    public double readDouble() throws IOException {
        return Double.longBitsToDouble(readLong());
    }

    @Override
    public String readLine() throws IOException {
        StringBuilder sb = new StringBuilder();
        int c = read();
        if (c < 0) {
            return null;
        }
        while (c >= 0 && c != '\n') {
            if (c == '\r') {
                long at = getFilePointer();
                if (read() != '\n') {
                    seek(at);
                }
                break;
            }
            sb.append((char) c);
            c = read();
        }
        return sb.toString();
    }

    @Override
    public String readUTF() throws IOException {
        return DataInputStream.readUTF(this);
    }

    // ---- DataOutput ----------------------------------------------------------------

    @Override
    public void writeBoolean(boolean v) throws IOException {
        write(v ? 1 : 0);
    }

    @Override
    public void writeByte(int v) throws IOException {
        write(v);
    }

    @Override
    public void writeShort(int v) throws IOException {
        write(ByteBuffer.allocate(2).putShort((short) v).array());
    }

    @Override
    public void writeChar(int v) throws IOException {
        writeShort(v);
    }

    @Override
    public void writeInt(int v) throws IOException {
        write(ByteBuffer.allocate(4).putInt(v).array());
    }

    @Override
    public void writeLong(long v) throws IOException {
        write(ByteBuffer.allocate(8).putLong(v).array());
    }

    @Override
    public void writeFloat(float v) throws IOException {
        writeInt(Float.floatToIntBits(v));
    }

    @Override
    public void writeDouble(double v) throws IOException {
        writeLong(Double.doubleToLongBits(v));
    }

    @Override
    public void writeBytes(String s) throws IOException {
        byte[] b = new byte[s.length()];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) s.charAt(i);
        }
        write(b);
    }

    @Override
    public void writeChars(String s) throws IOException {
        ByteBuffer bb = ByteBuffer.allocate(s.length() * 2);
        for (int i = 0; i < s.length(); i++) {
            bb.putChar(s.charAt(i));
        }
        write(bb.array());
    }

    @Override
    public void writeUTF(String s) throws IOException {
        byte[] utf = s.getBytes(StandardCharsets.UTF_8);
        // Modified UTF-8 as DataOutput specifies: NUL and supplementary characters differ.
        java.io.ByteArrayOutputStream bos = new java.io.ByteArrayOutputStream(utf.length + 2);
        new java.io.DataOutputStream(bos).writeUTF(s);
        if (bos.size() > 65537) {
            throw new UTFDataFormatException("encoded string too long");
        }
        write(bos.toByteArray());
    }
}
