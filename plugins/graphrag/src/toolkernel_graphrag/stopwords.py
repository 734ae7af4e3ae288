"""English words that start sentences but never name anything: dropped from the ends of phrases."""

from __future__ import annotations

# A dense word list reads better than one word a line.
# fmt: off
STOPWORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "against", "all", "also", "although", "am",
        "among", "an", "and", "another", "any", "are", "as", "at", "be", "because", "been",
        "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
        "does", "doing", "down", "during", "each", "either", "even", "ever", "every", "few", "for",
        "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
        "him", "himself", "his", "how", "however", "i", "if", "in", "into", "is", "it", "its",
        "itself", "just", "later", "least", "less", "many", "may", "me", "meanwhile", "might",
        "more", "most", "much", "must", "my", "myself", "neither", "never", "nevertheless", "no",
        "nor", "not", "now", "of", "off", "often", "on", "once", "one", "only", "or", "other",
        "others", "otherwise", "our", "ours", "ourselves", "out", "over", "own", "per", "perhaps",
        "rather", "same", "several", "shall", "she", "should", "since", "so", "some", "such",
        "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
        "therefore", "these", "they", "this", "those", "though", "through", "thus", "to", "today",
        "too", "under", "unlike", "until", "up", "upon", "us", "very", "was", "we", "were", "what",
        "whatever", "when", "whenever", "where", "whereas", "whether", "which", "while", "who",
        "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you", "your",
        "yours", "yourself", "yourselves", "according", "additionally", "despite", "following",
        "furthermore", "here", "including", "instead", "like", "moreover", "nonetheless", "notably",
        "overall", "similarly", "still", "there", "thereafter", "together", "unless", "via",
        "whereby", "first", "second", "third", "new",
    ]
)
# fmt: on
