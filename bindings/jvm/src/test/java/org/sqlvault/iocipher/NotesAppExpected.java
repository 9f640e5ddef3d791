package org.sqlvault.iocipher;

/** What example.NotesApp prints on a new container (checked in-process and in a fresh JVM). */
public final class NotesAppExpected {
    private NotesAppExpected() {
    }

    /** The whole standard output of {@code NotesApp CONTAINER pw 300000}. */
    public static final String OUTPUT = String.join("\n",
            "line 1: Dear diary,",
            "line 2: today I moved to sqlvault.",
            "line 3: P.S. nothing else changed.",
            "attachment length: 300000",
            "attachment intact: true",
            "record 50: -50 50000",
            "journal pointer: 612",
            "journal length: 720",
            "batch files: 20",
            "rename: true",
            "old exists: false, new is file: true",
            "delete: true",
            "notes: attachment.bin,batch,journal.dat,renamed.txt",
            "entry attachment.bin dir=false modified>0=true",
            "entry batch dir=true modified>0=true",
            "entry journal.dat dir=false modified>0=true",
            "entry renamed.txt dir=false modified>0=true",
            "mounted after unmount: false",
            "");
}
