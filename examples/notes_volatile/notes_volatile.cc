// notes_volatile: a linked list of notes in DRAM. Lost when the program ends.
// Compare with examples/notes/notes.cc, its persistent port.
#include <cstdio>

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
  Notes* notes = new Notes{};
  Note* n = new Note{notes->head, notes->count + 1, {}};
  std::snprintf(n->text, sizeof n->text, "%s", argc > 1 ? argv[1] : "hello");
  notes->head = n;
  notes->count++;
  for (Note* p = notes->head; p != nullptr; p = p->next) std::printf("%d %s\n", p->id, p->text);
  return 0;
}
