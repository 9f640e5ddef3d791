// The C# case of `sqlvault-bench bindings` (compiled by the bench with mcs against the
// packaged SqlVault.dll; run on Mono and on CoreCLR): writes then reads a file of --mib
// MiB through VaultStream, 1 MiB per call, then opens a vault with the key file
// DIR/bench.key and writes a 4 KiB file 20 times; prints the harness's CaseOutput as
// JSON (per phase wall seconds, units and process CPU seconds; peak RSS in KiB). The data
// is the Rust case's: one random MiB with a unique stamp every 4 KiB, checked on the
// way back.
using System;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using SqlVault;

class BenchIo
{
    const int Block = 1 << 20, StampEvery = 4096, Small = 4096, Opens = 20;

    static double Cpu() { return Process.GetCurrentProcess().TotalProcessorTime.TotalSeconds; }

    static void Stamp(byte[] buf, long blockNo)
    {
        long b = blockNo * (Block / StampEvery);
        for (int j = 0; j < Block / StampEvery; j++)
        {
            byte[] v = BitConverter.GetBytes(b + j);
            Buffer.BlockCopy(v, 0, buf, j * StampEvery, 8);
        }
    }

    static string Phase(double seconds, double units, double cpu)
    {
        var c = CultureInfo.InvariantCulture;
        return "{\"seconds\":" + seconds.ToString("R", c) + ",\"units\":" + units.ToString("R", c) + ",\"cpu_s\":" + cpu.ToString("R", c) + "}";
    }

    static long PeakRssKib()
    {
        foreach (var line in File.ReadAllLines("/proc/self/status"))
            if (line.StartsWith("VmHWM:")) return long.Parse(line.Substring(6).Trim().Split(' ')[0], CultureInfo.InvariantCulture);
        return 0;
    }

    static int Main(string[] args)
    {
        long mib = 0; string dir = null;
        for (int i = 0; i < args.Length; i++)
        {
            if (args[i] == "--mib") mib = long.Parse(args[++i], CultureInfo.InvariantCulture);
            else if (args[i] == "--dir") dir = args[++i];
            else throw new ArgumentException("unknown argument " + args[i]);
        }
        if (mib <= 0 || dir == null) throw new ArgumentException("usage: BenchIo.exe --mib N --dir DIR");
        string path = Path.Combine(dir, "cs-bench.vault");
        var buf = new byte[Block];
        new Random(7).NextBytes(buf);
        string write, read, open;
        using (var v = Vault.Create(path, "bench", 8192, 1))
        {
            var sw = Stopwatch.StartNew();
            double c0 = Cpu(), excluded = 0;
            using (var s = v.OpenFile("/big.bin", FileMode.CreateNew, FileAccess.Write))
            {
                for (long i = 0; i < mib; i++)
                {
                    double t = sw.Elapsed.TotalSeconds;
                    Stamp(buf, i);
                    excluded += sw.Elapsed.TotalSeconds - t;
                    s.Write(buf, 0, Block);
                }
            }
            write = Phase(sw.Elapsed.TotalSeconds - excluded, (double)mib * Block, Cpu() - c0);
            var into = new byte[Block];
            long total = 0, block = 0;
            c0 = Cpu();
            sw.Restart();
            using (var s = v.OpenFile("/big.bin", FileMode.Open, FileAccess.Read))
            {
                while (true)
                {
                    int n = 0, got;
                    while (n < Block && (got = s.Read(into, n, Block - n)) > 0) n += got;
                    if (n == 0) break;
                    if (BitConverter.ToInt64(into, 0) != block * (Block / StampEvery))
                        throw new Exception("block " + block + " read back wrong");
                    total += n; block++;
                }
            }
            read = Phase(sw.Elapsed.TotalSeconds, total, Cpu() - c0);
            if (total != mib * Block) throw new Exception("read " + total + " bytes, wrote " + mib * Block);
        }
        File.Delete(path);

        string key = Path.Combine(dir, "bench.key"), small = Path.Combine(dir, "cs-open.vault");
        using (Vault.CreateWithKeyFile(small, key)) { }
        var data = new byte[Small];
        {
            var sw = Stopwatch.StartNew();
            double c0 = Cpu();
            for (int i = 0; i < Opens; i++)
                using (var v = Vault.OpenWithKeyFile(small, key))
                    v.WriteAllBytes("/small-" + i + ".bin", data);
            open = Phase(sw.Elapsed.TotalSeconds, Opens, Cpu() - c0);
        }
        foreach (var f in new[] { small, small + "-wal", small + "-shm" }) File.Delete(f);
        Console.WriteLine("{\"phases\":{\"write\":" + write + ",\"read\":" + read + ",\"open\":" + open +
            "},\"peak_rss_kib\":" + PeakRssKib() + ",\"notes\":{\"runtime\":\"" +
            (Type.GetType("Mono.Runtime") != null ? "Mono" : "CoreCLR " + Environment.Version) + "\"}}");
        return 0;
    }
}
