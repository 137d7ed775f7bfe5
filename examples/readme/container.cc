// The container snippet of README.md, as a program (tests/readme_snippets.sh
// checks that README shows the lines between the markers, verbatim). Each
// run adds a note to data/notes.pm, or to the file named on the command line.
#include <cstdio>
#include <filesystem>
#include <string>

struct Note {
  struct Note* next;
  int n;
};

// README: begin
#include "pm/container.h"

struct Notes { Note* head; int count; };

int add_note(const std::string& path) {
  pm::Options o;
  o.create_if_missing = true;
  auto c = pm::Container::open(path, o);                // Result<unique_ptr<Container>>
  if (!c.ok()) {                                         // says what failed and what to do
    std::fprintf(stderr, "%s\n", c.status().to_string().c_str());
    return 1;
  }
  Notes* notes = (*c)->root<Notes>();                    // nullptr in a new container
  if (!notes) (void)(*c)->set_root(notes = *(*c)->make<Notes>());
  Note* n = *(*c)->make<Note>(Note{notes->head, ++notes->count});
  notes->head = n;                                       // plain stores
  pm::Status s = (*c)->commit();                         // durable and atomic
  if (!s.ok()) return 1;
  std::printf("%d notes\n", notes->count);
  return 0;
}
// README: end

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "data/notes.pm";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                          ? "."
                                          : std::filesystem::path(path).parent_path());
  return add_note(path);
}
