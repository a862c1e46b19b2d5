#pragma once
// Every file one command writes, planned before the work and put in place
// all or nothing.
//
//   OutputSet outs;
//   outs.add_input(config);  outs.add_input(weights);      // what it reads
//   outs.add_file("--output", out_path);                    // checked now
//   outs.add_folder("--dump-stages", dir);                  // checked now
//   ... the work ...
//   outs.stage(out_path, [&](const std::string& tmp) { write_npy(tmp, t); });
//   outs.stage_in_folder(dir, "q.npy", ...);
//   outs.commit();                                          // renames into place
//
// add_file / add_folder check, before any work, that the output's folder
// exists, is a folder and is writable (by creating the temporary file the
// output will be staged in), that the output is not an existing folder (or,
// for a folder output, an existing file), and that it is not the same file
// as any input or any other output: same inode (hard links, symlinks,
// "./x" vs "x") or, for files that do not exist yet, the same resolved path.
// stage() writes into that temporary; commit() renames every temporary onto
// its target. A command that fails before commit() leaves every target as
// it was: the destructor removes the temporaries. Every failure is an
// InputError naming the flag and the path.
//
// The one exception is open_stream(): a file that rows are appended to as
// they finish (`mha bench --format jsonl --output FILE`), so that an
// interrupted command keeps the rows it finished. It is checked like any
// output but truncated and written in place from the start.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mha::io {

class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  ~OutputSet();

  // A file or folder the command reads; for a folder, every file in it.
  // Tensor specs ("f.npz:name") are given as their file part. Paths that
  // do not exist are ignored (the reader reports them).
  void add_input(const std::string& path);

  // A file the command will write. `flag` names it in messages.
  void add_file(const std::string& flag, const std::string& path);
  // A folder the command will write files into; created on commit when it
  // does not exist (its parent must).
  void add_folder(const std::string& flag, const std::string& path);

  // Writes the content of a file added with add_file: `write` is given the
  // temporary's path and writes the whole file there.
  void stage(const std::string& path, const std::function<void(const std::string&)>& write);
  void stage_bytes(const std::string& path, const std::string& bytes);
  // Writes FOLDER/NAME for a folder added with add_folder.
  void stage_in_folder(const std::string& folder, const std::string& name,
                       const std::function<void(const std::string&)>& write);

  // For a writer that fills a file added with add_file over time (a ring
  // run's output rows as they arrive): the temporary's path, and
  // mark_staged() once the whole content is in it. Unless marked, the
  // temporary is removed like any other.
  std::string temporary(const std::string& path);
  void mark_staged(const std::string& path);

  // Renames every staged temporary into place. Outputs that were added but
  // never staged are left untouched.
  void commit();

  // A file added with add_file, truncated now and written in place; the
  // caller flushes after each row. Not part of the all-or-nothing commit.
  std::FILE* open_stream(const std::string& path);

 private:
  struct Id {
    bool exists = false;
    unsigned long long dev = 0, ino = 0;
    std::string resolved;  // canonical parent + file name
  };
  struct Output {
    std::string flag, path;
    bool folder = false;
    Id id;
    std::string tmp;                 // reserved temporary (file) or staging folder
    bool folder_exists = false;      // folder output that already exists
    bool staged = false;
    std::vector<std::pair<std::string, std::string>> folder_files;  // tmp, final
  };
  struct Input {
    std::string path;
    Id id;
  };

  static Id identify(const std::string& path);
  void check_distinct(const std::string& flag, const std::string& path, const Id& id) const;
  Output& find(const std::string& path, bool folder);
  void cleanup() noexcept;

  std::vector<Input> inputs_;
  std::vector<std::unique_ptr<Output>> outputs_;
  std::vector<std::FILE*> streams_;
};

}  // namespace mha::io
