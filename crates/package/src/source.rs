//! Finding packages on disk and reading their files into memory, safely.
//!
//! A package is a directory holding `manifest.json`, or such a directory inside a
//! `.tar`, `.tar.gz`/`.tgz` or `.tar.zst` archive. Reading refuses anything that could
//! escape the package (`..`, absolute paths, links) and bounds sizes so that a hostile
//! archive cannot exhaust memory.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::budget::{MemoryBudget, Reservation};
use crate::error::{Error, Problem, Result};
use crate::Hash;

/// Size bounds applied while reading. Exceeding one rejects the package (or, for an
/// archive-wide bound, the archive) before more is read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_file_bytes: u64,
    pub max_package_bytes: u64,
    pub max_package_files: usize,
    /// Total uncompressed bytes read from one archive (an archive is held in memory
    /// while its packages are sorted out, so this bounds memory per archive).
    pub max_archive_bytes: u64,
    /// Members of one archive (bounds the bookkeeping of empty files).
    pub max_archive_members: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_bytes: 256 << 20,
            max_package_bytes: 1 << 30,
            max_package_files: 100_000,
            max_archive_bytes: 2 << 30,
            max_archive_members: 1_000_000,
        }
    }
}

/// Somewhere packages come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A package directory (it holds `manifest.json`).
    Dir(PathBuf),
    /// An archive holding one or more package directories.
    Archive(PathBuf),
}

impl Source {
    pub fn path(&self) -> &Path {
        match self {
            Source::Dir(p) | Source::Archive(p) => p,
        }
    }
}

/// One file of a package, with its blake3 hash.
#[derive(Debug, Clone)]
pub struct PackageFile {
    /// Package-relative, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
    pub hash: Hash,
}

/// A package read into memory, files sorted by path bytes, its id computed.
#[derive(Debug, Clone)]
pub struct RawPackage {
    /// Display name: the directory, or `archive!dir` inside an archive.
    pub name: String,
    pub files: Vec<PackageFile>,
    pub id: Hash,
}

impl RawPackage {
    /// Hashes every file and computes the episode id (docs/format.md §6.4).
    pub fn new(name: String, files: BTreeMap<String, Vec<u8>>) -> RawPackage {
        // BTreeMap<String, _> iterates in bytewise order of the UTF-8 path, as docs/format.md §6.4 asks.
        let files: Vec<PackageFile> = files
            .into_iter()
            .map(|(path, bytes)| {
                let hash = *blake3::hash(&bytes).as_bytes();
                PackageFile { path, bytes, hash }
            })
            .collect();
        let id = crate::episode_id(files.iter().map(|f| (f.path.as_str(), &f.hash)));
        RawPackage { name, files, id }
    }

    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.binary_search_by(|f| f.path.as_str().cmp(path)).ok().map(|i| self.files[i].bytes.as_slice())
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes.len() as u64).sum()
    }
}

fn archive_kind(path: &Path) -> Option<Compression> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    if name.ends_with(".tar") {
        Some(Compression::None)
    } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Some(Compression::Gzip)
    } else if name.ends_with(".tar.zst") || name.ends_with(".tzst") {
        Some(Compression::Zstd)
    } else {
        None
    }
}

#[derive(Clone, Copy)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Finds every package under `paths`: a path that is a package directory or an archive
/// is taken as it is; any other directory is walked recursively (in name order, so
/// results are reproducible). A directory holding `manifest.json` is one package: its
/// subdirectories are its files, not further packages.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for path in paths {
        let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            walk(path, &mut out)?;
        } else if archive_kind(path).is_some() {
            out.push(Source::Archive(path.clone()));
        } else {
            return Err(Error::Archive {
                path: path.clone(),
                message: "not a package directory, a folder of packages, or a .tar/.tar.gz/.tar.zst archive".into(),
            });
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<Source>) -> Result<()> {
    // Anything named manifest.json makes a package, whatever it is: a FIFO or a link
    // to a device there is then refused by name when the package is read, rather than
    // the folder skipped without a word.
    if fs::symlink_metadata(dir.join("manifest.json")).is_ok() {
        out.push(Source::Dir(dir.to_path_buf()));
        return Ok(());
    }
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| Error::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        // Do not follow links while searching: a link could lead anywhere.
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file() && archive_kind(&path).is_some() {
            out.push(Source::Archive(path));
        }
    }
    Ok(())
}

/// Reads every package of a source. An archive-level problem (an escaping member,
/// a link, a size bound) rejects every package of the archive: its members cannot be
/// trusted to be attributed to the right package.
pub fn read_source(source: &Source, limits: &Limits) -> Vec<Result<RawPackage>> {
    let budget = MemoryBudget::unlimited();
    let mut reservation = budget.reserve();
    let packages = read_source_within(source, limits, &mut reservation);
    drop(reservation);
    packages
}

/// As [`read_source`], charging every file's bytes to `reservation` before reading
/// them, so threads reading side by side stay within one [`MemoryBudget`].
pub fn read_source_within(source: &Source, limits: &Limits, reservation: &mut Reservation) -> Vec<Result<RawPackage>> {
    match source {
        Source::Dir(dir) => vec![read_dir_package(dir, limits, reservation)],
        Source::Archive(path) => match read_archive(path, limits, reservation) {
            Ok(packages) => packages,
            Err(e) => vec![Err(e)],
        },
    }
}

fn read_dir_package(dir: &Path, limits: &Limits, reservation: &mut Reservation) -> Result<RawPackage> {
    let name = dir.display().to_string();
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    collect_dir(dir, dir, &name, limits, reservation, &mut files, &mut total)?;
    Ok(RawPackage::new(name, files))
}

fn collect_dir(
    root: &Path,
    dir: &Path,
    name: &str,
    limits: &Limits,
    reservation: &mut Reservation,
    files: &mut BTreeMap<String, Vec<u8>>,
    total: &mut u64,
) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let rel = path.strip_prefix(root).expect("walk stays under root");
        let Some(rel) = rel.to_str().map(|s| s.replace(std::path::MAIN_SEPARATOR, "/")) else {
            return Err(Problem::package(name, format!("file name {} is not UTF-8", rel.display())).into());
        };
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_symlink() {
            return Err(
                Problem { file: Some(rel), ..Problem::package(name, "links are not allowed in a package") }.into()
            );
        } else if kind.is_dir() {
            collect_dir(root, &path, name, limits, reservation, files, total)?;
        } else if kind.is_file() {
            let size = entry.metadata().map_err(|e| Error::io(&path, e))?.len();
            check_sizes(name, &rel, size, files.len() + 1, *total + size, limits)?;
            // Read at most one byte past the limit: a file that grew since it was
            // measured is caught here rather than read whole.
            reservation.charge(size);
            let mut bytes = Vec::with_capacity(size as usize);
            fs::File::open(&path)
                .and_then(|f| f.take(limits.max_file_bytes + 1).read_to_end(&mut bytes))
                .map_err(|e| Error::io(&path, e))?;
            check_sizes(name, &rel, bytes.len() as u64, files.len() + 1, *total + bytes.len() as u64, limits)?;
            *total += bytes.len() as u64;
            files.insert(rel, bytes);
        } else {
            return Err(Problem { file: Some(rel), ..Problem::package(name, "not a regular file") }.into());
        }
    }
    Ok(())
}

fn check_sizes(name: &str, file: &str, size: u64, count: usize, total: u64, limits: &Limits) -> Result<()> {
    let problem = |message: String| -> Result<()> {
        Err(Problem { file: Some(file.to_string()), ..Problem::package(name, message) }.into())
    };
    if size > limits.max_file_bytes {
        return problem(format!("file is {size} bytes, above the limit of {} bytes", limits.max_file_bytes));
    }
    if count > limits.max_package_files {
        return problem(format!("package has more than {} files", limits.max_package_files));
    }
    if total > limits.max_package_bytes {
        return problem(format!("package is above the limit of {} bytes", limits.max_package_bytes));
    }
    Ok(())
}

/// Splits an archive member path into safe, normal components, or says why it is unsafe.
fn safe_member_path(raw: &[u8]) -> std::result::Result<String, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "member path is not UTF-8".to_string())?;
    if text.starts_with('/') || text.contains('\\') || text.contains('\0') {
        return Err(format!("member `{text}` has an absolute or non-portable path"));
    }
    let mut parts = Vec::new();
    for (i, part) in text.split('/').enumerate() {
        match part {
            "" | "." => {}
            ".." => return Err(format!("member `{text}` escapes the package (`..`)")),
            // A drive letter (`C:`) makes the path absolute on Windows.
            p if i == 0 && p.len() == 2 && p.as_bytes()[1] == b':' => {
                return Err(format!("member `{text}` has an absolute path"))
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// The largest GNU long name or pax header an archive may hold (paths are far shorter).
const MAX_HEADER_EXTENSION: u64 = 64 << 10;

/// How one pass over an archive charges what it reads.
enum Charging<'r, 'a> {
    /// Charge each member to the reservation, giving up (and dropping what was read)
    /// when the budget cannot take the next one.
    Within(&'r mut Reservation<'a>),
    /// Read headers only: the pass measures the archive and checks its limits.
    Measure,
    /// Read everything: the whole archive was charged beforehand.
    Charged,
}

/// What one pass over an archive gave.
enum Pass {
    Members(BTreeMap<String, Vec<u8>>),
    /// `Charging::Within` met the end of the budget.
    OverBudget,
    /// `Charging::Measure`: the bytes of every member.
    Measured(u64),
}

/// An archive's packages. An archive is read whole (a package's files may be anywhere in
/// it), so one that does not fit in the budget beside what other readers hold is read
/// again, alone: what it read is given back, a headers-only pass measures it (an
/// archive bomb past `max_archive_bytes` is refused there, holding nothing), and the
/// whole size is charged at once, which waits until no other reader holds anything.
/// Before, it read on past the budget while the others kept theirs: four bombs in one
/// folder held 2.9 GB with a 1 GiB budget.
fn read_archive(path: &Path, limits: &Limits, reservation: &mut Reservation) -> Result<Vec<Result<RawPackage>>> {
    let members = match archive_pass(path, limits, Charging::Within(reservation))? {
        Pass::Members(members) => members,
        _ => {
            reservation.release();
            let Pass::Measured(total) = archive_pass(path, limits, Charging::Measure)? else {
                unreachable!("a measuring pass measures")
            };
            reservation.charge(total);
            match archive_pass(path, limits, Charging::Charged)? {
                Pass::Members(members) => members,
                _ => unreachable!("a charged pass reads"),
            }
        }
    };
    group_archive(path, limits, members)
}

/// One pass over an archive's members, checking every limit on the way.
fn archive_pass(path: &Path, limits: &Limits, mut charging: Charging) -> Result<Pass> {
    let display = path.display().to_string();
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let reader: Box<dyn Read> = match archive_kind(path).expect("discover only yields archives") {
        Compression::None => Box::new(std::io::BufReader::new(file)),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(file).map_err(|e| Error::io(path, e))?),
    };
    let reject = |message: String| Problem::package(&display, message);
    let mut archive = tar::Archive::new(reader);
    let mut members: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut total = 0u64;
    // Raw entries: the tar crate would read a GNU long name or a pax header whole into
    // memory, whatever size its header claims (gigabytes, past every limit here), so
    // this loop reads them itself, bounded.
    let entries = archive.entries().map_err(|e| Error::io(path, e))?.raw(true);
    let (mut long_name, mut pax_path): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::Archive { path: path.into(), message: e.to_string() })?;
        let kind = entry.header().entry_type();
        if kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions()
        {
            let size = entry.header().size().map_err(|e| Error::io(path, e))?;
            if size > MAX_HEADER_EXTENSION {
                return Err(reject(format!(
                    "a header extension (long name or pax header) of {size} bytes, above the limit of {MAX_HEADER_EXTENSION}"
                ))
                .into());
            }
            let mut data = Vec::with_capacity(size as usize);
            (&mut entry).take(size).read_to_end(&mut data).map_err(|e| Error::io(path, e))?;
            if kind.is_gnu_longname() {
                long_name = Some(data.strip_suffix(b"\0").map(<[u8]>::to_vec).unwrap_or(data));
            } else if kind.is_pax_local_extensions() {
                for extension in tar::PaxExtensions::new(&data).flatten() {
                    if extension.key_bytes() == b"path" {
                        pax_path = Some(extension.value_bytes().to_vec());
                    }
                }
            }
            // A long link name and global pax headers name nothing a package keeps.
            continue;
        }
        let named = pax_path.take().or(long_name.take());
        let raw_name = named.unwrap_or_else(|| entry.path_bytes().into_owned());
        let member = safe_member_path(&raw_name).map_err(reject)?;
        // An old (v7) tar marks a directory only by the `/` ending its name.
        if kind.is_dir() || raw_name.ends_with(b"/") {
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(reject(format!("member `{member}` is a link; links are not allowed in a package")).into());
        }
        if !kind.is_file() {
            return Err(reject(format!("member `{member}` is not a regular file")).into());
        }
        let size = entry.header().size().map_err(|e| Error::io(path, e))?;
        if size > limits.max_file_bytes {
            return Err(reject(format!(
                "member `{member}` is {size} bytes, above the limit of {}",
                limits.max_file_bytes
            ))
            .into());
        }
        total += size;
        if total > limits.max_archive_bytes {
            return Err(reject(format!("archive holds more than {} bytes", limits.max_archive_bytes)).into());
        }
        match &mut charging {
            Charging::Within(reservation) => {
                if !reservation.try_charge(size) {
                    return Ok(Pass::OverBudget);
                }
            }
            Charging::Measure => {
                // Unread data is skipped by the next entry.
                if members.len() >= limits.max_archive_members {
                    return Err(
                        reject(format!("archive holds more than {} members", limits.max_archive_members)).into()
                    );
                }
                if members.insert(member.clone(), Vec::new()).is_some() {
                    return Err(reject(format!("member `{member}` appears twice")).into());
                }
                continue;
            }
            Charging::Charged => {}
        }
        // Read no more than the header promised, even if the stream lies; into a buffer
        // of exactly that size (growing one by doubling held up to twice the bytes).
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry).take(size).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        if members.len() >= limits.max_archive_members {
            return Err(reject(format!("archive holds more than {} members", limits.max_archive_members)).into());
        }
        if members.insert(member.clone(), bytes).is_some() {
            return Err(reject(format!("member `{member}` appears twice")).into());
        }
    }

    if matches!(charging, Charging::Measure) {
        return Ok(Pass::Measured(total));
    }
    Ok(Pass::Members(members))
}

/// The packages of an archive's members.
fn group_archive(path: &Path, limits: &Limits, members: BTreeMap<String, Vec<u8>>) -> Result<Vec<Result<RawPackage>>> {
    let display = path.display().to_string();
    let reject = |message: String| Problem::package(&display, message);
    // Package roots: directories holding manifest.json, outermost first. A file belongs
    // to the outermost root above it (a manifest deeper inside is an artifact).
    let mut roots: Vec<String> = Vec::new();
    for member in members.keys() {
        let dir = match member.strip_suffix("manifest.json") {
            Some("") => "",
            Some(d) if d.ends_with('/') => &d[..d.len() - 1],
            _ => continue,
        };
        if !roots.iter().any(|r| is_under(dir, r)) {
            roots.retain(|r| !is_under(r, dir));
            roots.push(dir.to_string());
        }
    }
    if roots.is_empty() {
        return Err(reject("archive holds no package (no manifest.json)".into()).into());
    }
    let mut grouped: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (member, bytes) in members {
        if let Some(root) = roots.iter().find(|r| is_under(&member, r)) {
            if member == *root {
                // Found by the fuzzer: a file named like the package's own directory.
                return Err(reject(format!("member `{member}` is a file and also the directory of a package")).into());
            }
            let rel = if root.is_empty() { member.clone() } else { member[root.len() + 1..].to_string() };
            grouped.entry(root.clone()).or_default().insert(rel, bytes);
        }
        // Files outside every package (a README beside the packages) are not episodes.
    }
    Ok(grouped
        .into_iter()
        .map(|(root, files)| {
            let name = if root.is_empty() { display.clone() } else { format!("{display}!{root}") };
            let mut total = 0u64;
            for (i, (file, bytes)) in files.iter().enumerate() {
                total += bytes.len() as u64;
                check_sizes(&name, file, bytes.len() as u64, i + 1, total, limits)?;
            }
            Ok(RawPackage::new(name, files))
        })
        .collect())
}

/// Is `path` equal to or inside directory `dir` ("" is the archive root)?
fn is_under(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_that_escape_are_refused() {
        assert!(safe_member_path(b"../x").is_err());
        assert!(safe_member_path(b"a/../../x").is_err());
        assert!(safe_member_path(b"/etc/passwd").is_err());
        assert!(safe_member_path(b"C:/x").is_err());
        assert_eq!(safe_member_path(b"./pkg/manifest.json").unwrap(), "pkg/manifest.json");
        assert_eq!(safe_member_path(b"pkg/artifacts/a:b.log").unwrap(), "pkg/artifacts/a:b.log");
    }

    fn member_names(path: &Path) -> std::result::Result<Vec<String>, String> {
        let packages = read_archive(path, &Limits::default(), &mut MemoryBudget::unlimited().reserve());
        let packages = packages.map_err(|e| e.to_string())?;
        Ok(packages.into_iter().flat_map(|p| p.unwrap().files.into_iter().map(|f| f.path)).collect())
    }

    fn write_tar(path: &Path, members: &[(&str, Vec<u8>)]) {
        let mut tar = tar::Builder::new(std::fs::File::create(path).unwrap());
        for (member, bytes) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            tar.append_data(&mut header, member, &bytes[..]).unwrap();
        }
        tar.finish().unwrap();
    }

    /// An archive larger than what the budget has left is not read on past it beside
    /// the others' bytes: it gives back what it read, waits until it is alone, and is
    /// read whole then. The held bytes never pass the larger of the budget and the
    /// archive.
    #[test]
    fn an_archive_past_the_budget_waits_to_be_read_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.tar");
        let artifact = |c: u8| vec![c; 600];
        write_tar(
            &path,
            &[
                ("pkg/manifest.json", b"{}".to_vec()),
                ("pkg/artifacts/a", artifact(b'a')),
                ("pkg/artifacts/b", artifact(b'b')),
            ],
        );
        let budget = MemoryBudget::new(1000);
        let mut other = budget.reserve();
        other.charge(300);
        let finished = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut reservation = budget.reserve();
                let packages = read_archive(&path, &Limits::default(), &mut reservation).unwrap();
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
                (packages.into_iter().map(|p| p.unwrap().files.len()).collect::<Vec<_>>(), reservation.bytes())
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(!finished.load(std::sync::atomic::Ordering::SeqCst), "read past the budget beside another reader");
            assert_eq!(budget.held(), 300, "what the archive read first was not given back");
            drop(other);
            let (files, charged) = reader.join().unwrap();
            assert_eq!(files, vec![3]);
            assert_eq!(charged, 1202, "the whole archive is charged at once");
        });
        assert_eq!(budget.held(), 0);
    }

    /// An archive bomb past `max_archive_bytes` is refused by the measuring pass,
    /// holding nothing past the budget.
    #[test]
    fn an_archive_past_its_limit_is_refused_when_measured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.tar");
        let members: Vec<(String, Vec<u8>)> = (0..8).map(|i| (format!("pkg/artifacts/{i}"), vec![0u8; 4096])).collect();
        let mut all: Vec<(&str, Vec<u8>)> = vec![("pkg/manifest.json", b"{}".to_vec())];
        all.extend(members.iter().map(|(n, b)| (n.as_str(), b.clone())));
        write_tar(&path, &all);
        let limits = Limits { max_archive_bytes: 20_000, ..Limits::default() };
        let budget = MemoryBudget::new(10_000);
        let mut reservation = budget.reserve();
        let err = read_archive(&path, &limits, &mut reservation).unwrap_err().to_string();
        assert!(err.contains("archive holds more than 20000 bytes"), "{err}");
        assert_eq!(reservation.bytes(), 0, "the refused archive's bytes were charged");
    }

    #[test]
    fn long_member_names_from_gnu_and_pax_headers_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("artifacts/{}/log.txt", "d".repeat(150));
        for (name, pax) in [("gnu.tar", false), ("pax.tar", true)] {
            let path = dir.path().join(name);
            let mut tar = tar::Builder::new(std::fs::File::create(&path).unwrap());
            for (member, bytes) in [("manifest.json", &b"{}"[..]), (long.as_str(), b"x")] {
                let mut header = tar::Header::new_gnu();
                header.set_size(bytes.len() as u64);
                header.set_mode(0o644);
                if pax && member.len() > 100 {
                    tar.append_pax_extensions([("path", member.as_bytes())]).unwrap();
                    header.set_path("short-name").unwrap();
                    header.set_cksum();
                    tar.append(&header, bytes).unwrap();
                } else {
                    tar.append_data(&mut header, member, bytes).unwrap(); // GNU long name past 100 bytes
                }
            }
            tar.finish().unwrap();
            drop(tar);
            assert_eq!(member_names(&path).unwrap(), vec![long.clone(), "manifest.json".to_string()], "{name}");
        }
    }

    #[test]
    fn a_long_name_claiming_gigabytes_is_refused_without_reading_it() {
        // Found by the fuzzer: a GNU long-name header claiming gigabytes of name, which
        // the tar crate itself reads whole into memory.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/fuzz-crashes/archive-gnu-longname-bomb.tar.zst");
        let err = member_names(&path).unwrap_err();
        assert!(err.contains("header extension"), "{err}");
    }

    #[test]
    fn the_fuzzers_archives_are_read_or_refused_without_a_panic() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/fuzz-crashes");
        // An old-format directory entry (type "regular", name ending in `/`) is a directory.
        let names = member_names(&fixtures.join("archive-v7-directory-entry-equals-package-root.tar")).unwrap();
        assert!(names.contains(&"manifest.json".to_string()), "{names:?}");
        // The fuzzer's own input: refused or read, never a panic.
        let _ = member_names(&fixtures.join("archive-member-path-equals-package-root.tar"));
    }

    #[test]
    fn a_file_named_like_a_package_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clash.tar");
        let mut tar = tar::Builder::new(std::fs::File::create(&path).unwrap());
        for member in ["pkg/manifest.json", "pkg"] {
            let mut header = tar::Header::new_gnu();
            header.set_size(2);
            header.set_mode(0o644);
            tar.append_data(&mut header, member, &b"{}"[..]).unwrap();
        }
        tar.finish().unwrap();
        drop(tar);
        let err = member_names(&path).unwrap_err();
        assert!(err.contains("also the directory of a package"), "{err}");
    }

    #[test]
    fn is_under_respects_component_boundaries() {
        assert!(is_under("pkg/a", "pkg"));
        assert!(!is_under("pkg2/a", "pkg"));
        assert!(is_under("anything", ""));
    }
}
