package example;

// An app written against IOCipher, moved to sqlvault by changing these imports from
// info.guardianproject.iocipher.* to org.sqlvault.iocipher.*: nothing else differs.
import org.sqlvault.iocipher.File;
import org.sqlvault.iocipher.FileInputStream;
import org.sqlvault.iocipher.FileOutputStream;
import org.sqlvault.iocipher.FileReader;
import org.sqlvault.iocipher.FileWriter;
import org.sqlvault.iocipher.RandomAccessFile;
import org.sqlvault.iocipher.VirtualFileSystem;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Arrays;

/**
 * A small notes app in IOCipher's style: one container, a notes directory, notes written
 * with FileWriter and read with FileReader, an attachment copied with streams, a journal
 * patched in place with RandomAccessFile, a batch of files in a transaction. Prints what it
 * finds, one line per fact, so a test (and a person) can check it.
 *
 * <p>Usage: {@code NotesApp CONTAINER PASSWORD ATTACHMENT-SIZE}
 */
public class NotesApp {
    public static void main(String[] args) throws IOException {
        String dbFile = args[0];
        String password = args[1];
        int attachmentSize = Integer.parseInt(args[2]);

        VirtualFileSystem vfs = VirtualFileSystem.get();
        if (!new java.io.File(dbFile).exists()) {
            vfs.createNewContainer(dbFile, password);
        }
        vfs.mount(dbFile, password);
        try {
            File notes = new File("/notes");
            if (!notes.exists()) {
                notes.mkdirs();
            }

            // A note, written and read as text.
            File note = new File(notes, "first.txt");
            try (BufferedWriter w = new BufferedWriter(new FileWriter(note))) {
                w.write("Dear diary,");
                w.newLine();
                w.write("today I moved to sqlvault.");
                w.newLine();
            }
            try (BufferedWriter w = new BufferedWriter(new FileWriter(note, true))) {
                w.write("P.S. nothing else changed.");
                w.newLine();
            }
            try (BufferedReader r = new BufferedReader(new FileReader(note))) {
                String line;
                int n = 0;
                while ((line = r.readLine()) != null) {
                    System.out.println("line " + (++n) + ": " + line);
                }
            }

            // An attachment copied in 8 KiB steps, as apps do.
            File attachment = new File("/notes/attachment.bin");
            byte[] content = new byte[attachmentSize];
            for (int i = 0; i < content.length; i++) {
                content[i] = (byte) (i * 31 + 7);
            }
            try (OutputStream out = new FileOutputStream(attachment)) {
                for (int at = 0; at < content.length; at += 8192) {
                    out.write(content, at, Math.min(8192, content.length - at));
                }
            }
            byte[] back = new byte[attachmentSize];
            try (InputStream in = new FileInputStream(attachment)) {
                int at = 0;
                int n;
                while ((n = in.read(back, at, Math.min(8192, back.length - at))) > 0) {
                    at += n;
                }
            }
            System.out.println("attachment length: " + attachment.length());
            System.out.println("attachment intact: " + Arrays.equals(content, back));

            // A journal of fixed-size records, patched in place.
            File journal = new File(notes, "journal.dat");
            try (RandomAccessFile raf = new RandomAccessFile(journal, "rw")) {
                for (int i = 0; i < 100; i++) {
                    raf.writeInt(i);
                    raf.writeLong(i * 1000L);
                }
                raf.seek(12 * 50);
                raf.writeInt(-50);
                raf.seek(12 * 50);
                System.out.println("record 50: " + raf.readInt() + " " + raf.readLong());
                System.out.println("journal pointer: " + raf.getFilePointer());
                raf.setLength(12 * 60);
                System.out.println("journal length: " + raf.length());
            }

            // Many small files in one transaction.
            vfs.beginTransaction();
            File batch = new File("/notes/batch");
            batch.mkdir();
            for (int i = 0; i < 20; i++) {
                try (FileOutputStream out = new FileOutputStream(new File(batch, "n" + i + ".txt"))) {
                    out.write(("note " + i).getBytes("UTF-8"));
                }
            }
            vfs.completeTransaction();
            System.out.println("batch files: " + batch.list().length);

            // Rename and delete.
            File renamed = new File("/notes/renamed.txt");
            System.out.println("rename: " + note.renameTo(renamed));
            System.out.println("old exists: " + note.exists() + ", new is file: " + renamed.isFile());
            System.out.println("delete: " + new File("/notes/batch/n0.txt").delete());

            String[] names = notes.list();
            Arrays.sort(names);
            System.out.println("notes: " + String.join(",", names));
            for (File f : notes.listFiles()) {
                System.out.println("entry " + f.getName() + " dir=" + f.isDirectory() + " modified>0=" + (f.lastModified() > 0));
            }
        } finally {
            vfs.unmount();
        }
        System.out.println("mounted after unmount: " + vfs.isMounted());
    }
}
