// notes: examples/notes_volatile/notes_volatile.cc made persistent. The list
// lives in a container (default ./data/notes.pm); every run adds a note and
// prints them all. The port is the lines marked "pm:": open a container, find
// the root, allocate with make<>, commit. Pointers stay raw.
#include <cstdio>

#include "pm/container.h"  // pm:

struct Note {
  Note* next;
  int id;
  char text[48];
};

struct Notes {
  Note* head;
  int count;
};

int main(int argc, char** argv) {
  pm::Options o;                                                                        // pm:
  o.create_if_missing = true;                                                           // pm:
  auto c = pm::Container::open(argc > 2 ? argv[2] : "data/notes.pm", o);                // pm:
  if (!c.ok()) return std::fprintf(stderr, "%s\n", c.status().to_string().c_str()), 1;  // pm:
  Notes* notes = (*c)->root<Notes>();                                                   // pm:
  if (notes == nullptr) (void)(*c)->set_root(notes = *(*c)->make<Notes>());             // pm:
  Note* n = *(*c)->make<Note>(Note{notes->head, notes->count + 1, {}});                 // pm:
  std::snprintf(n->text, sizeof n->text, "%s", argc > 1 ? argv[1] : "hello");
  notes->head = n;
  notes->count++;
  if (pm::Status s = (*c)->commit(); !s.ok())
    return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;  // pm:
  for (Note* p = notes->head; p != nullptr; p = p->next) std::printf("%d %s\n", p->id, p->text);
  return 0;
}
